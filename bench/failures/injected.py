"""Injected faults (SPMD_FAULT): a rank raising, exiting, hanging, reading NaN, running out of memory or
computing a wrong value, each in one phase. Each case names the rank the fault struck."""

from __future__ import annotations

from .case import FaultCase

# what each kind of fault ends with: an exception exits 1, the watchdog 4, verification 3, a refusal 2 (an exit
# ends with the process's own code, so any non-zero one)
EXITS = {"raise": 1, "hang": 4, "nan": 3, "oom": 2, "corrupt": 3}


def cases(ranks: int, gpu: bool) -> list[FaultCase]:
    last = ranks - 1
    out = [
        FaultCase(
            f"raise at {phase} on rank {r}",
            f"rank={r},phase={phase},kind=raise",
            expect=EXITS["raise"],
            says=(f"rank {r} on {{host}}: injected fault", f"at phase {phase}"),
        )
        for phase, r in (("read", last), ("h2d", 1), ("compute", 1), ("comm", 0), ("report", 1))
        if gpu or phase != "h2d"
    ]
    out.append(
        FaultCase(
            "exit at compute on rank 1",
            "rank=1,phase=compute,kind=exit",
            says=("rank 1 on {host}: SPMD_FAULT: injecting exit at phase compute",),
        )
    )
    out += [
        FaultCase(
            f"hang at {phase} on rank {r}",
            f"rank={r},phase={phase},kind=hang",
            expect=EXITS["hang"],
            says=("watchdog", f"rank {r} on {{host}}: phase {phase}, not in a collective"),
        )
        for phase, r in (("read", 0), ("compute", 1), ("comm", last), ("report", 1))
    ]
    out += [
        FaultCase(
            "hang at read on every rank",
            "rank=all,phase=read,kind=hang",
            expect=EXITS["hang"],
            says=("has been in phase read", "no rank waits in a collective"),
        ),
        FaultCase(
            "nan at read on rank 1 (verification)",
            "rank=1,phase=read,kind=nan",
            expect=EXITS["nan"],
            says=("rank 1 on {host}: this rank's own moments", "hold NaN or infinity"),
        ),
        FaultCase(
            "oom at read on rank 1 (host buffers)",
            "rank=1,phase=read,kind=oom",
            expect=EXITS["oom"],
            says=("rank 1 on {host}", "refused before allocating"),
        ),
        FaultCase(
            "oom at h2d on rank 1 (device buffers)",
            "rank=1,phase=h2d,kind=oom",
            expect=EXITS["oom"],
            says=("rank 1 on {host}", "refused before allocating"),
        ),
        FaultCase(
            "nan at read on rank 1, check_finite: true",
            "rank=1,phase=read,kind=nan",
            {"check_finite": True},
            expect=2,
            says=("rank 1 on {host}", "hold NaN or infinity after the read"),
        ),
        FaultCase(
            "corrupt at compute on rank 1 (silent: one moment times 1.01)",
            "rank=1,phase=compute,kind=corrupt",
            expect=EXITS["corrupt"],
            says=("rank 1 on {host}: this rank's own moments", "(exact)"),
        ),
    ]
    return out

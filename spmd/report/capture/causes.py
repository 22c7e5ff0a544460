"""Why the ranks waited: the captured steps of every rank together (report.json ``kernels``) and the cause the
straggler finding names.

Collectives: the k-th collective of a captured step is the same allreduce on every rank (DDP's buckets go in one
order), so they are matched by position. A collective ends for all ranks at about the same moment: the rank that
arrived last spent least in it, and that time is the transfer; what each other rank spent beyond it is its wait
for the last one (clock-free: durations only). The step's critical path is, at each collective, the rank that
arrived last and what the others waited for it.

The cause of the straggler (the rank the others waited for, named by spmd.report.breakdown) is the first of these
whose excess per step over the other ranks' median is at least CAUSE_SHARE of a step:
- ``data``: its data phase (timed marks);
- ``more work``: its device's own work (compute kernels, or CPU operators) took longer and it ran more of them;
- ``slower device``: the same kernels (or operators), each slower (a throttled or slower GPU; on a CPU a slowed
  or shared core, unless the time between operators grew more, then ``host``); or, on a GPU, its device idle while
  its next kernel was already queued (``idle.other``: the GPU ran another process's work meanwhile, which no trace
  of this rank holds);
- ``host``: what remains when the device did the same work: on a GPU its device sat idle waiting for launches (a
  slowed or contended host thread, a launch-bound step); on a CPU time between operators.
A kernel's time does not depend on the other ranks; idle time does (a rank that waits for a peer waits inside
the collective, so its GPU looks busy and the late rank's idle), hence that order. Without a capture only the
phases can speak: the phase furthest above the others'.
"""

from __future__ import annotations

import statistics

from ...core.timing import host_side
from ...core.units import fmt_seconds

MORE_KERNELS = 1.02  # more than this many times the others' kernels (or operators) a step: more work
CAUSE_SHARE = 0.05  # an explanation counts when its excess is at least this share of a step
# what report.json keeps of a rank's analysis (its per-step lists and kernel names stay on the rank's side)
PER_RANK_KEYS = ("device", "steps", "median", "overlap", "top", "capture", "why", "temporal", "idle_by_stream")


def combine(analyses: list, records_by_rank: list[list[dict]], steps_per_repeat: int | None) -> dict | None:
    """report.json's ``kernels``: every rank's captured steps, the collectives matched across ranks, the critical
    path (None when no rank captured)."""
    if not analyses or all(a is None for a in analyses):
        return None
    ranks = []
    for r, a in enumerate(analyses):
        a = a or {"steps": 0, "why": "not captured"}
        ranks.append({"rank": r, **{k: a[k] for k in PER_RANK_KEYS if k in a}})
    out = {
        "device": next((a.get("device") for a in analyses if a and a.get("device")), None),
        "steps": min((a or {}).get("steps", 0) for a in analyses),
        "untimed_collectives": any((a or {}).get("untimed_collectives") for a in analyses),
        "per_rank": ranks,
        "collectives": collectives(analyses),
    }
    out["critical_path"] = critical_path(out["collectives"])
    return retimed(out, records_by_rank, steps_per_repeat)


def retimed(kernels: dict | None, records_by_rank: list[list[dict]], steps_per_repeat: int | None) -> dict | None:
    """``kernels`` (combined) with what capturing cost against these timed repeats' steps (``combine``'s own, or
    another run's capture joined to them: report.build.with_capture)."""
    if not kernels:
        return kernels
    out = {k: v for k, v in kernels.items() if k != "capture_cost"}
    costs = [
        r["capture"]["seconds_per_step"] for r in kernels["per_rank"] if r.get("capture") and r["capture"]["steps"]
    ]
    timed = _timed_step_seconds(records_by_rank, steps_per_repeat)
    if costs and timed:
        c = statistics.median(costs)
        out["capture_cost"] = {"captured_step_s": c, "timed_step_s": timed, "ratio": c / timed}
    return out


def _timed_step_seconds(records_by_rank, steps_per_repeat) -> float | None:
    if not steps_per_repeat or not records_by_rank or not records_by_rank[0]:
        return None
    return statistics.median(r["total"] for r in records_by_rank[0]) / steps_per_repeat


def collectives(analyses: list) -> dict:
    """Per rank the median per step of its time in collectives beyond the last arrival's (``wait_us``) and of
    the transfer (``transfer_us``), and per position in the step who arrived last."""
    lists = [(a or {}).get("per_step") or [] for a in analyses]
    size = len(lists)
    if size < 2 or not all(lists):
        return {"matched": False, "why": "fewer than two ranks captured steps"}
    steps = min(len(x) for x in lists)
    per_step_wait = [[0.0] * steps for _ in range(size)]
    transfer = [0.0] * steps
    # per position in the step, per rank: what the others waited there in the steps that rank arrived last, so that
    # a wait is charged to the rank that caused it, whoever arrived last at that position in other steps
    waited_for: dict[int, list[float]] = {}
    for k in range(steps):
        durations = [x[k].get("comm_kernels") or [] for x in lists]
        counts = {len(d) for d in durations}
        if len(counts) != 1:
            return {"matched": False, "why": f"the ranks ran {sorted(counts)} collectives in captured step {k}"}
        for j in range(counts.pop()):
            d = [durations[r][j] for r in range(size)]
            low = min(d)
            transfer[k] += low
            for r in range(size):
                per_step_wait[r][k] += d[r] - low
            waited_for.setdefault(j, [0.0] * size)[d.index(low)] += sum(x - low for x in d)
    if not waited_for:
        return {"matched": False, "why": "no collective ran in the captured steps"}
    return {
        "matched": True,
        "per_step": len(waited_for),
        "transfer_us": statistics.median(transfer),
        "wait_us": [statistics.median(w) for w in per_step_wait],
        "wait_us_per_step": per_step_wait,
        "last": [
            {
                "collective": j,
                "last_rank": max(range(size), key=lambda r: w[r]),
                "others_waited_us": max(w) / steps,
                "waited_for_us": [x / steps for x in w],
            }
            for j, w in sorted(waited_for.items())
        ],
    }


def critical_path(coll: dict) -> list[dict]:
    """At each collective of a step, each rank the others waited for there and how long (a step's mean over the
    captured steps, counting only the steps that rank arrived last)."""
    if not coll.get("matched"):
        return []
    return [
        {"collective": c["collective"], "last_rank": r, "others_waited_us": w}
        for c in coll["last"]
        for r, w in enumerate(c["waited_for_us"])
        if w > 0
    ]


# -- the cause of a straggler ------------------------------------------------------------------------


def cause(
    slow: int,
    records_by_rank: list[list[dict]],
    kernels: dict | None,
    steps_per_repeat: int | None,
    sharing: dict[int, int] | None = None,
) -> dict:
    """Why rank ``slow`` made the others wait: {cause, cause_seconds (its excess per step), evidence (a clause)}.

    The first explanation whose excess per step is at least CAUSE_SHARE of the step. First its data phase (timed marks);
    then its device's own work (compute kernels or CPU operators, more of them or the same ones slower, or on a GPU
    its kernels queued while the device ran something else); then a GPU that ran another process beside it, where the
    others' did not (``sharing``: rank -> other processes on its GPU, from NVML; on a shared GPU even the launches
    wait, so the host looks slow too); then its host
    (what remains when the device did the same work; on a GPU the device waited for launches). The device's kernel time
    does not depend on the other ranks; the host's idle time does (a rank that waits for a peer waits in the collective,
    so its GPU looks busy and the late rank's idle), so the host is named only where the robust measures do not explain
    the wait."""
    others = [r for r in range(len(records_by_rank)) if r != slow]
    steps = steps_per_repeat or 1
    step = statistics.median(r["total"] for r in records_by_rank[slow]) / steps
    found = []
    data = phase_excess(records_by_rank, slow, others, "data")
    if data is not None and data / steps >= CAUSE_SHARE * step:
        found.append(
            (
                "data",
                data / steps,
                f"its data phase took {fmt_seconds(_phase(records_by_rank, slow, 'data') / steps).strip()} a step "
                f"against {fmt_seconds(_others(records_by_rank, others, 'data') / steps).strip()} on the others",
            )
        )
    ranks = (kernels or {}).get("per_rank") or []
    mine = ranks[slow] if slow < len(ranks) and ranks[slow].get("steps") else None
    theirs = [ranks[r] for r in others if r < len(ranks) and ranks[r].get("steps")]
    if mine and theirs:
        m, t = mine["median"], [x["median"] for x in theirs]
        gpu = mine.get("device") == "gpu"
        span = m["span_us"]
        comp, comp_o = m["compute_us"], statistics.median(x["compute_us"] for x in t)
        n, n_o = m["kernels"], statistics.median(x["kernels"] for x in t)
        what = "kernels" if gpu else "operators"
        if comp - comp_o >= CAUSE_SHARE * span:
            if n > MORE_KERNELS * n_o:
                found.append(
                    (
                        "more work",
                        (comp - comp_o) / 1e6,
                        f"it ran more work: {n:.0f} {what} a step against {n_o:.0f}, {comp / 1e3:.2f} ms of them "
                        f"against {comp_o / 1e3:.2f} ms on the others" + _extra_names(mine, theirs),
                    )
                )
            else:
                found.append(
                    (
                        "slower device",
                        (comp - comp_o) / 1e6,
                        f"the same {n:.0f} {what} a step took {comp / 1e3:.2f} ms against {comp_o / 1e3:.2f} ms on "
                        + (
                            "the others (a slower or throttled GPU at equal work)"
                            if gpu
                            else "the others (its host ran the same operators slower: a busy or shared core)"
                        ),
                    )
                )
        if not gpu and found and found[-1][0] == "slower device":
            # a CPU's operators and the time between them are both its host's: name what added more (a sleep
            # between operators can leave the next ones a little slower too, their caches cold)
            host = _host(mine, theirs, kernels, slow, others, gpu)
            if host[1] > found[-1][1]:
                found[-1] = host[:3]
        queued = m["idle"]["other"] if gpu else 0.0
        queued_o = statistics.median(x["idle"]["other"] for x in t) if gpu else 0.0
        if not found and gpu and queued - queued_o >= CAUSE_SHARE * span:
            found.append(
                (
                    "slower device",
                    (queued - queued_o) / 1e6,
                    f"its GPU sat idle {queued / 1e3:.2f} ms a step with its next kernel already queued, against "
                    f"{queued_o / 1e3:.2f} ms on the others: the device ran other work meanwhile (another process on "
                    f"its GPU: nvidia-smi lists it)",
                )
            )
        if not found and shared_alone(slow, others, sharing):
            host = _host(mine, theirs, kernels, slow, others, gpu)
            found.append(_busy_device(sharing[slow], host[1], f"; {host[3]}"))
        if not found:
            host = _host(mine, theirs, kernels, slow, others, gpu)
            if host[1] >= CAUSE_SHARE * step:  # named only where its own numbers show the excess
                found.append(host[:3])
            else:
                return {"cause": None, "undetermined": host[3]}
    if not found and shared_alone(slow, others, sharing):
        found.append(_busy_device(sharing[slow], None, ""))
    if not found:
        return {"cause": None}
    name, seconds, evidence = found[0]
    return {"cause": name, "cause_seconds": seconds, "evidence": evidence}


def shared_alone(slow: int, others: list[int], sharing: dict[int, int] | None) -> bool:
    """Whether the straggler's GPU ran another process and no other rank's did."""
    return bool(sharing) and sharing.get(slow, 0) > 0 and not any(sharing.get(r, 0) for r in others)


def _busy_device(processes: int, seconds: float | None, numbers: str) -> tuple[str, float | None, str]:
    return (
        "slower device",
        seconds,
        f"another process ran on its GPU ({processes} beside its rank at the repeats' start and end, NVML), and on "
        f"no other rank's: its kernels and launches waited for the other's work{numbers}",
    )


def _host(mine, theirs, kernels, slow, others, gpu) -> tuple[str, float, str, str]:
    """The host explanation: on a GPU its device idle for want of launches; on a CPU its time between operators
    (less what it waited for collectives there). (cause, excess seconds a step, evidence, the bare numbers)."""
    m = mine["median"]
    if gpu:
        host, host_o = m["idle"]["host"], statistics.median(x["median"]["idle"]["host"] for x in theirs)
        return (
            "host",
            max(0.0, host - host_o) / 1e6,
            f"the same {m['kernels']:.0f} kernels ran as fast as on the others, but its GPU sat idle waiting for "
            f"its host to launch them {host / 1e3:.2f} ms a step ({m['launches']:.0f} launches; the others' "
            f"{host_o / 1e3:.2f} ms, whose GPUs waited in the collectives instead): its host thread is slower",
            f"its GPU waited for launches {host / 1e3:.2f} ms a step against {host_o / 1e3:.2f} ms on the others",
        )
    coll = kernels.get("collectives") or {}
    waits = coll["wait_us"] if coll.get("matched") else [0.0] * (max(others + [slow]) + 1)
    ranks = kernels["per_rank"]
    host = m["idle"]["other"] - waits[slow]
    host_o = statistics.median(ranks[r]["median"]["idle"]["other"] - waits[r] for r in others if ranks[r].get("steps"))
    return (
        "host",
        max(0.0, host - host_o) / 1e6,
        f"the same {m['kernels']:.0f} operators ran as fast as on the others, but its step spent {host / 1e3:.2f} ms "
        f"between them (Python, the framework, a thread that sleeps or is descheduled) against {host_o / 1e3:.2f} ms",
        f"its step spent {host / 1e3:.2f} ms between operators against {host_o / 1e3:.2f} ms on the others",
    )


def _extra_names(mine: dict, theirs: list[dict]) -> str:
    """The kernels it ran more often than the others, by time (a clause, or nothing)."""
    names = mine.get("top") or []
    other = [{e["name"]: e["count"] for e in x.get("top") or []} for x in theirs]
    more = [e["name"] for e in names if all(e["count"] > o.get(e["name"], 0) for o in other)]
    return f" (more often: {', '.join(n[:60] for n in more[:2])})" if more else ""


def _phase(records_by_rank, rank: int, phase: str) -> float:
    return statistics.median(r.get(phase, 0.0) for r in records_by_rank[rank])


def _others(records_by_rank, others: list[int], phase: str) -> float:
    return statistics.median(_phase(records_by_rank, r, phase) for r in others)


def phase_excess(records_by_rank, slow: int, others: list[int], phase: str) -> float | None:
    """What rank ``slow``'s own work added to ``phase`` beyond the others' (median seconds a repeat; None where it
    has no such phase). Where the phase is a device span with its host side recorded (a GPU step's), only what its
    own host or device added: its host's seconds beyond the others' hosts', or its span beyond both theirs and its
    own host's. A device that ran out of queued work waits for its host, so its span grows to the host's pace
    while a peer's device, fed ahead because it waited in the collective, shows its kernels alone: a rank whose
    host is no slower than the others' is not slower there."""
    if not any(phase in r for r in records_by_rank[slow]):
        return None
    mine, theirs = _phase(records_by_rank, slow, phase), _others(records_by_rank, others, phase)
    side = host_side(phase)
    if not all(side in r for rank in [slow, *others] for r in records_by_rank[rank]):
        return mine - theirs
    host, their_host = _phase(records_by_rank, slow, side), _others(records_by_rank, others, side)
    return max(host - their_host, mine - max(theirs, host))

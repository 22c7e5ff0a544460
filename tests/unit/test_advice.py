"""The advice (spmd.scale.decision.advice) names what the numbers show: slower sizes, fixed costs, shared
resources, and storage: the largest run's read phase against plain preads of the same bytes measured right after
it, and whether reading is most of a repeat."""

from __future__ import annotations

import statistics

from hypothesis import given
from hypothesis import strategies as st

from spmd.scale.decision.advice import backend_advice, oversubscription_advice, series_advice, storage_advice
from spmd.scale.decision.history import HISTORY, history_advice


def row(mode, ranks, time, bytes_per_rank, **phases):
    timings = {
        p: {"min": t, "median": t, "max": t}
        for p, t in {"read": 0.0, "wait": 0.0, "compute": 0.0, "comm": 0.0, **phases}.items()
    }
    timings["total"] = {"min": time, "median": time, "max": time}
    return {"mode": mode, "ranks": ranks, "time": time, "bytes_per_rank": bytes_per_rank, "timings": timings}


def with_figures(rows):
    base = rows[0]
    for r in rows:
        p = r["ranks"] / base["ranks"]
        if r["mode"] == "strong":
            r["speedup"] = base["time"] / r["time"]
            r["efficiency"] = r["speedup"] / p
        else:
            r["efficiency"] = base["time"] / r["time"]
            r["speedup"] = r["efficiency"] * p
    return rows


def test_strong_slowdown_names_the_phase_that_grew():
    rows = with_figures(
        [row("strong", 1, 1.0, 1e9, compute=0.9, comm=0.1), row("strong", 2, 1.2, 5e8, compute=0.45, comm=0.75)]
    )
    lines = series_advice(rows)
    assert lines[0] == "Strong scaling 1 -> 2 ranks: speedup 0.83x, efficiency 42%."
    slower = [line for line in lines if line.startswith("Adding ranks made the job slower")]
    assert len(slower) == 1 and "1 -> 2 ranks took 1 s -> 1.2 s (+20%); comm grew most (+650 ms)" in slower[0]


def test_strong_fixed_cost_is_named():
    rows = with_figures(
        [row("strong", 1, 1e-3, 1e6, compute=5e-4, read=5e-4), row("strong", 2, 8e-4, 5e5, compute=4.8e-4, read=2.5e-4)]
    )
    lines = series_advice(rows)
    fixed = [line for line in lines if "does not shrink" in line]
    assert len(fixed) == 1 and fixed[0].startswith("compute took 500.0 us at 1 rank(s) and 480.0 us at 2")
    assert any(line.startswith("At 2 ranks efficiency is 62%: compute is") for line in lines)


def test_weak_contention_is_named():
    rows = with_figures(
        [row("weak", 1, 1.0, 1e9, read=0.5, compute=0.5), row("weak", 2, 1.5, 1e9, read=1.0, compute=0.5)]
    )
    lines = series_advice(rows)
    assert lines[0] == "Weak scaling 1 -> 2 ranks: efficiency 67% (each rank's share took 1.50x as long)."
    shared = [line for line in lines if "share something" in line]
    assert len(shared) == 1 and shared[0].startswith("Per rank, read moved 2 GB/s at 1 rank(s) but 1 GB/s at 2 (-50%)")


def test_hidden_phases_are_never_named_as_the_cost():
    """h2d_overlapped (the copy to the GPU the read hid) and comm_overlapped are not part of a repeat: a sweep
    whose read slowed is said to be slowed by the read, however much hidden copying grew with it (as measured
    on 2 H200s: 152 ms of hidden copies, named instead of the read)."""
    rows = with_figures(
        [
            row("strong", 1, 0.156, 4e9, read=0.154, h2d_overlapped=0.152, compute=1e-3),
            row("strong", 2, 0.135, 2e9, read=0.127, h2d_overlapped=0.132, compute=5e-4),
        ]
    )
    lines = series_advice(rows)
    assert any(line.startswith("read took 154 ms at 1 rank(s) and 127 ms at 2") for line in lines), lines
    assert any(line.startswith("At 2 ranks efficiency is 58%: read is") for line in lines), lines
    assert not any("h2d_overlapped" in line for line in lines), lines
    weak = with_figures(
        [
            row("weak", 1, 1.0, 1e9, read=0.5, compute=0.5, comm_overlapped=0.1),
            row("weak", 2, 1.5, 1e9, read=0.9, compute=0.5, comm_overlapped=2.0),
        ]
    )
    assert any(line.startswith("At 2 ranks efficiency is 67%: read is 400 ms") for line in series_advice(weak))


def test_good_scaling_says_only_so():
    rows = with_figures([row("strong", 1, 1.0, 1e9, compute=1.0), row("strong", 2, 0.5, 5e8, compute=0.5)])
    assert series_advice(rows) == ["Strong scaling 1 -> 2 ranks: speedup 2.00x, efficiency 100%."]
    assert series_advice(rows[:1]) == []


def test_oversubscription_is_reported_once_per_size():
    place = {"oversubscribed": ["vm"], "ranks_per_node": {"vm": 3}, "cpus_per_node": {"vm": 2}}
    runs = [
        {"ranks": 3, "placement": place},
        {"ranks": 3, "placement": place},
        {"ranks": 2, "placement": {"oversubscribed": []}},
    ]
    lines = oversubscription_advice(runs)
    assert lines == [
        "At 3 ranks, host vm runs 3 ranks on 2 CPUs: they compete for cores, so this size measures "
        "contention, not scaling (the model is fitted without it)."
    ]


def compared(mode, ranks, nbytes, time=1e-3, skipped=None, **seconds):
    return {
        "mode": mode,
        "ranks": ranks,
        "time": time,
        "backends": {
            "ranks": ranks,
            "ops": [{"op": "allreduce", "bytes": nbytes}],
            "seconds": {k.replace("_", "-"): v for k, v in seconds.items()},
            "skipped": skipped or {},
        },
    }


def test_one_fastest_backend_at_every_size_is_one_sentence_with_the_spread():
    runs = [
        compared("strong", 2, 1024, nccl=20e-6, mpi=80e-6, mpi_cuda=700e-6),
        compared("strong", 4, 512, nccl=30e-6, mpi=150e-6, mpi_cuda=900e-6),
    ]
    lines = backend_advice(runs, "nccl")
    assert lines == [
        "Communicator: nccl was fastest for this workload's own collectives at every measured size "
        "(allreduce of 512 B to 1 KiB per rank; per repeat nccl 20.0 us to 30.0 us, mpi 4 to 5x as "
        "long, mpi-cuda 30 to 35x as long); the sweep used nccl."
    ]


def test_switching_is_advised_only_when_it_saves_a_real_share_of_a_repeat():
    runs = [
        compared("strong", 2, 1024, time=1e-3, nccl=20e-6, mpi=80e-6),
        compared("strong", 4, 512, time=1e-3, nccl=30e-6, mpi=150e-6),
    ]
    assert backend_advice(runs, "mpi")[0].endswith(
        "the sweep used mpi, which took 60.0 us to 120.0 us more per repeat (12.0% of a repeat at most): "
        "set comm: nccl."
    )
    slow_job = [{**r, "time": 10.0} for r in runs]
    assert backend_advice(slow_job, "mpi")[0].endswith(
        "the sweep used mpi, which took 60.0 us to 120.0 us more per repeat (0.0% of a repeat at most): "
        "not worth a change."
    )


def test_a_winner_that_changes_with_size_is_named_per_run():
    runs = [compared("strong", 2, 8, nccl=20e-6, mpi=10e-6), compared("weak", 2, 1 << 26, nccl=1e-3, mpi=90e-3)]
    lines = backend_advice(runs, "nccl")
    assert lines[0] == (
        "Communicator at strong 2 ranks (allreduce of 8 B per rank): mpi was fastest "
        "(per repeat mpi 10.0 us, nccl 2x as long); the sweep used nccl, which took 10.0 us more "
        "per repeat (1.0% of a repeat at most): not worth a change."
    )
    assert lines[1].startswith("Communicator at weak 2 ranks (allreduce of 64 MiB per rank): nccl was fastest")
    assert lines[1].endswith("the sweep used nccl.") and len(lines) == 2


def test_a_backend_timed_no_further_is_said_to_take_more_than_its_bound():
    run = compared("strong", 2, 1 << 28, nccl=2e-3, mpi=0.5)
    run["backends"]["stopped"] = {"mpi": 1}  # its first op alone took 250x nccl's repeat
    line = backend_advice([run], "nccl")[0]
    assert "per repeat nccl 2 ms, mpi more than 250x as long (timed no further)" in line, line
    assert line.endswith("the sweep used nccl.")


def test_backends_that_could_not_run_are_named_with_the_reason_and_cpu_runs_say_nothing():
    why = "comm: mpi-cuda needs a CUDA-aware MPI, and this one is not (x: MPIX_Query_cuda_support() = 0)"
    lines = backend_advice([compared("strong", 2, 64, skipped={"mpi-cuda": why}, nccl=1e-5, mpi=2e-5)], "nccl")
    assert lines[0].startswith("Communicator: nccl was fastest for this workload's own collectives at 2 ranks")
    assert lines[1] == f"Communicator mpi-cuda not compared: {why}"
    assert (
        backend_advice([{"mode": "strong", "ranks": 2, "backends": None}, {"mode": "strong", "ranks": 1}], "mpi") == []
    )


def run(ranks, read_s, total_s, limit_s, nbytes=1 << 30):
    timings = {"read": {"min": read_s, "median": read_s, "max": read_s}, "total": {"median": total_s}}
    return {
        "ranks": ranks,
        "report": {"timings": timings},
        "read_limit": [{"bytes": nbytes, "seconds": limit_s}] * ranks,
    }


def test_reads_at_the_storages_limit_and_most_of_a_repeat_are_storage_bound():
    (line,) = storage_advice([run(1, 0.5, 0.6, 0.25), run(2, 0.5, 0.6, 0.45)])
    assert line.startswith(
        "At 2 ranks each rank read 1 GiB at 2.15 GB/s (the slowest rank), 90% of what plain preads of the same bytes"
    )
    assert "reading is 83% of a repeat" in line and "storage-bound" in line and "fewer bytes or faster storage" in line


def test_reads_below_the_limit_name_the_engine_and_threads():
    (line,) = storage_advice([run(4, 0.5, 0.6, 0.1)])
    assert "20% of what plain preads" in line and "read-bound below the storage's limit" in line
    assert "io.engine, io.threads" in line


def test_a_short_read_is_only_described_and_no_limit_says_nothing():
    (line,) = storage_advice([run(2, 0.1, 1.0, 0.1)])
    assert line.endswith("reading is 10% of a repeat.")
    assert storage_advice([{**run(2, 0.1, 1.0, 0.1), "read_limit": None}]) == []
    assert storage_advice([{**run(2, 0.1, 1.0, 0.1), "read_limit": [None, {"bytes": 1, "seconds": 1}]}]) == []


def launch_run(mode, own, comm=0.0):
    """A run of ``len(own)`` ranks whose rank r took own[r] seconds of its own a repeat, and ``comm`` in collectives."""
    per_rank = [{"median": {"total": t + comm, "comm": comm, "wait": 0.0}} for t in own]
    return {"mode": mode, "ranks": len(own), "report": {"per_rank": per_rank}}


times = st.floats(0.0, 10.0)  # a rank all comm and wait has no time of its own


@given(st.lists(times, min_size=2, max_size=8), st.lists(times, min_size=2, max_size=8), st.floats(0.0, 1.0))
def test_ranks_new_to_a_launch_are_told_only_when_each_is_slower_than_each_that_ran_before(before, new, comm):
    """Over generated own times: the sentence comes iff every new rank is slower than every rank that ran before and
    their medians differ by HISTORY or more; waits in collectives change nothing; a weak series after the strong,
    whose ranks all ran before, is never told."""
    ran, n = len(before), len(before) + len(new)
    runs = [launch_run("strong", before[:1]), launch_run("strong", before), launch_run("strong", before + new, comm)]
    told = history_advice([*runs, launch_run("weak", before + new)])
    base = statistics.median(before)
    ratio = statistics.median(new) / base if base > 0 else 0.0
    expected = min(new) > max(before) and ratio >= HISTORY
    assert len(told) == int(expected), (told, before, new)
    if expected:
        assert told[0].startswith(f"At {n} ranks (strong): ranks {ran}-{n - 1}, new to this launch"), told
        assert f"(0-{ran - 1}), {ratio:.2f}x their median own time" in told[0], told


@given(st.lists(times, min_size=3, max_size=8), st.floats(2.0, 50.0))
def test_one_rank_alone_before_or_one_rank_new_is_never_told(own, slower):
    """Two ranks or more on each side or nothing: one rank added at a time, each far slower than all before it, or
    one rank before and the rest new and far slower, are never told; neither are ranks all alike."""
    grown = [own[0] * slower**k for k in range(len(own))]
    assert history_advice([launch_run("strong", grown[: n + 1]) for n in range(len(own))]) == []
    assert history_advice([launch_run("strong", own[:1]), launch_run("strong", own[:1] + [own[0] * slower] * 3)]) == []
    assert history_advice([launch_run("strong", own[:2]), launch_run("strong", [own[0]] * len(own))]) == []

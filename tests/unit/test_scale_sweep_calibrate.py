"""The sweep's comparison of communicators (spmd.scale.sweep.calibrate.compare_backends), over generated timings: the
run's own communicator is timed first and in full; another stops once its ops so far take STOP_AT x the fastest's
repeat, which never changes which one is fastest, and says where it stopped. An op and size met again (a model's equal
gradient buckets) is timed once and counted each time."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from spmd.scale.sweep import calibrate


class Comm(SimpleNamespace):
    def close(self):
        self.closed = True


@settings(max_examples=200, deadline=None)
@given(
    own=st.sampled_from(["nccl", "mpi", "mpi-cuda"]),
    per_size=st.lists(  # seconds a call of each size takes on each communicator
        st.fixed_dictionaries({n: st.floats(1e-6, 10.0) for n in ("nccl", "mpi", "mpi-cuda")}), min_size=4, max_size=4
    ),
    sizes=st.lists(st.integers(0, 3), min_size=1, max_size=8),  # each op's size: equal buckets among them
    calls=st.integers(1, 20),
)
def test_a_slow_communicator_stops_early_and_the_fastest_is_unchanged(own, per_size, sizes, calls):
    ops = [{"op": "allreduce", "bytes": 1 << k, "calls": calls} for k in sizes]
    per_op = [per_size[k] for k in sizes]
    timed = []

    def checked_seconds(ctx, comm, op, nbytes, what):
        timed.append(comm.name)
        return per_size[nbytes.bit_length() - 1][comm.name]

    saved = calibrate.checked_seconds, calibrate.open_communicator
    calibrate.checked_seconds = checked_seconds
    calibrate.open_communicator = lambda ctx, name: Comm(name=name, size=2)
    try:
        workload = SimpleNamespace(problem=lambda: {"comm": ops})
        out = calibrate.compare_backends(SimpleNamespace(device="gpu"), Comm(name=own, size=2), workload)
    finally:
        calibrate.checked_seconds, calibrate.open_communicator = saved
    full = {n: list(itertools.accumulate(calls * t[n] for t in per_op))[-1] for n in ("nccl", "mpi", "mpi-cuda")}
    assert timed[0] == own and out["seconds"][own] == full[own] and own not in out["stopped"]
    assert full[min(out["seconds"], key=out["seconds"].get)] == min(full.values())  # the fastest (or a tie)
    order = [own] + [n for n in ("nccl", "mpi", "mpi-cuda") if n != own]
    for i, name in enumerate(order[1:], 1):  # stopped exactly where its partial sum first passed the bound
        fastest = min(out["seconds"][n] for n in order[:i])
        partial = list(itertools.accumulate(calls * t[name] for t in per_op))
        first = next((k + 1 for k in range(len(ops) - 1) if partial[k] > calibrate.STOP_AT * fastest), None)
        assert out["stopped"].get(name) == first
    for name, seconds in out["seconds"].items():
        if name in out["stopped"]:  # what it took up to there is already beyond the bound, and below its repeat
            done = out["stopped"][name]
            assert 1 <= done < len(ops) and timed.count(name) == len(set(sizes[:done]))
            assert seconds > calibrate.STOP_AT * min(out["seconds"].values()) and seconds <= full[name]
        else:
            assert seconds == full[name] and timed.count(name) == len(set(sizes))


def test_one_rank_and_the_cpu_compare_nothing():
    workload = SimpleNamespace(problem=lambda: {"comm": [{"op": "allreduce", "bytes": 8}]})
    assert calibrate.compare_backends(SimpleNamespace(device="gpu"), Comm(name="nccl", size=1), workload) is None
    assert calibrate.compare_backends(SimpleNamespace(device="cpu"), Comm(name="mpi", size=2), workload) is None

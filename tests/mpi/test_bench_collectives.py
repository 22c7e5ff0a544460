"""The measurement code of ``spmd bench comm`` and ``spmd scale``: every op, odd counts,
three dtypes, results checked, and a corrupted result counted as wrong."""

import numpy as np
import pytest

from spmd.measure import collectives as col

OPS = list(col.COLLECTIVES)
DTYPES = ["float32", "float64", "int32"]
SIZES = [4, 8, 28, 1000, 4 * 12347]  # 1 element, 2, 7 (odd), 250, 12347 (odd, not divisible by ranks)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_every_op_measures_and_checks(context, op, dtype):
    ctx, comm = context
    results = [col.measure(comm, ctx.xp, op, size, dtype, iters=3, warmup=1) for size in SIZES]
    itemsize = np.dtype(dtype).itemsize
    for size, r in zip(SIZES, results):
        per_rank, reported = col.counts(op, size, itemsize, ctx.size)
        assert r["wrong"] == 0, (op, size)
        assert r["count"] == reported and r["size"] == reported * itemsize and r["seconds"] > 0
        if op in ("allgather", "gather", "reduce_scatter"):
            assert reported % ctx.size == 0 and reported >= ctx.size
        else:
            assert reported == max(1, size // itemsize)


@pytest.mark.mpi(min_size=2)
def test_expected_matches_plain_numpy(context):
    """The bench's reference, against NumPy written out independently."""
    ctx, _ = context
    n, count = ctx.size, 12
    inputs = [(np.arange(count) % 13 + r + 1).astype(np.float32) for r in range(n)]
    total = np.sum(inputs, axis=0)
    assert np.array_equal(col.expected("allreduce", count, np.float32, ctx.rank, n), total)
    assert np.array_equal(col.expected("allgather", count, np.float32, ctx.rank, n), np.stack(inputs))
    block = count // n
    assert np.array_equal(
        col.expected("reduce_scatter", count, np.float32, ctx.rank, n), total[ctx.rank * block : (ctx.rank + 1) * block]
    )
    gathered = col.expected("gather", count, np.float32, ctx.rank, n)
    assert np.array_equal(gathered, np.stack(inputs) if ctx.rank == 0 else np.full((n, count), -1, np.float32))
    assert np.array_equal(col.expected("bcast", count, np.float32, ctx.rank, n), inputs[0])
    assert np.array_equal(col.expected("sendrecv", count, np.float32, ctx.rank, n), inputs[(ctx.rank - 1) % n])


class CorruptOnRankOne:
    """A communicator whose allreduce result is off by one in one element on rank 1."""

    def __init__(self, comm):
        self.comm, self.rank, self.size = comm, comm.rank, comm.size

    def allreduce(self, x, op="sum", out=None):
        out = self.comm.allreduce(x, op, out=out)
        if self.rank == 1 and x.size > 3:
            out[3] += 1
        return out

    def barrier(self):
        self.comm.barrier()


@pytest.mark.mpi(min_size=2)
def test_a_wrong_element_is_counted(context):
    ctx, comm = context
    r = col.measure(CorruptOnRankOne(comm), ctx.xp, "allreduce", 4096, "float32", iters=2, warmup=1)
    assert r["wrong"] == 1


@pytest.mark.mpi(min_size=2)
def test_scale_probe_times_the_workloads_collective_and_fails_on_a_wrong_result(context):
    from spmd.core.errors import VerificationError
    from spmd.scale.sweep.calibrate import probe_collectives

    ctx, comm = context

    class Workload:
        def problem(self):
            return {"bytes": 1, "comm": [{"op": "allreduce", "bytes": 40}]}

    points = probe_collectives(ctx, comm, Workload(), 4096)
    assert [(p["op"], p["ranks"], p["bytes"]) for p in points] == [
        ("allreduce", ctx.size, m) for m in (8, 64, 512, 4096)
    ]
    assert all(p["seconds"] > 0 for p in points)
    with pytest.raises(VerificationError, match="comm probe: allreduce with 64 bytes per rank gave 1 wrong"):
        probe_collectives(ctx, CorruptOnRankOne(comm), Workload(), 4096)

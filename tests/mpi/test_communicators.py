"""Every communicator op on every available backend, checked exactly against NumPy.

Inputs are small integers stored as floats, so every reduction is exact in any order.
"""

import numpy as np
import pytest

from spmd.core import xp as xpmod

DTYPES = [np.float32, np.float64, np.int32]
COUNTS = [1, 1000, 12345]


def rank_data(rank: int, count: int, dtype, shape_tail=()) -> np.ndarray:
    rng = np.random.default_rng([rank, count])
    return rng.integers(-1000, 1000, size=(count, *shape_tail)).astype(dtype)


def on_device(ctx, a):
    return ctx.xp.asarray(a)


def check_kind(ctx, out):
    """Results come back where the input lived."""
    assert xpmod.is_device_array(out) == (ctx.device == "gpu")


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("op", ["sum", "min", "max"])
def test_allreduce(context, dtype, count, op):
    ctx, comm = context
    mine = rank_data(ctx.rank, count, dtype)
    out = comm.allreduce(on_device(ctx, mine), op)
    everyone = np.stack([rank_data(r, count, dtype) for r in range(ctx.size)])
    want = {"sum": everyone.sum(0, dtype=dtype), "min": everyone.min(0), "max": everyone.max(0)}[op]
    check_kind(ctx, out)
    np.testing.assert_array_equal(xpmod.to_host(out), want)
    assert out.dtype == dtype


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", DTYPES)
def test_allgather(context, dtype):
    ctx, comm = context
    out = comm.allgather(on_device(ctx, rank_data(ctx.rank, 77, dtype, (3,))))
    check_kind(ctx, out)
    want = np.stack([rank_data(r, 77, dtype, (3,)) for r in range(ctx.size)])
    np.testing.assert_array_equal(xpmod.to_host(out), want)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduce_scatter(context, dtype):
    ctx, comm = context
    rows = 5 * ctx.size
    out = comm.reduce_scatter(on_device(ctx, rank_data(ctx.rank, rows, dtype, (2,))), "sum")
    check_kind(ctx, out)
    total = sum(rank_data(r, rows, dtype, (2,)) for r in range(ctx.size))
    np.testing.assert_array_equal(xpmod.to_host(out), total[5 * ctx.rank : 5 * ctx.rank + 5])
    with pytest.raises(ValueError, match="divisible"):
        comm.reduce_scatter(on_device(ctx, rank_data(0, rows + 1, dtype)), "sum")


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", DTYPES)
def test_bcast_from_last_rank_leaves_inputs_alone(context, dtype):
    ctx, comm = context
    root = ctx.size - 1
    mine = rank_data(ctx.rank, 333, dtype)
    x = on_device(ctx, mine)
    out = comm.bcast(x, root=root)
    check_kind(ctx, out)
    np.testing.assert_array_equal(xpmod.to_host(out), rank_data(root, 333, dtype))
    np.testing.assert_array_equal(xpmod.to_host(x), mine)


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sendrecv_ring_and_open_chain(context, dtype):
    ctx, comm = context
    r, n = ctx.rank, ctx.size
    send = on_device(ctx, rank_data(r, 101, dtype, (2,)))
    ring = on_device(ctx, np.full((101, 2), -7, dtype=dtype))
    out = comm.sendrecv(send, (r + 1) % n, ring, (r - 1) % n)
    assert out is ring
    # open chain: rank 0 receives nothing, the last rank sends nothing
    chain = on_device(ctx, np.full((101, 2), -7, dtype=dtype))
    comm.sendrecv(send, r + 1 if r + 1 < n else None, chain, r - 1 if r > 0 else None)
    comm.barrier()
    np.testing.assert_array_equal(xpmod.to_host(ring), rank_data((r - 1) % n, 101, dtype, (2,)))
    if r == 0:
        assert (xpmod.to_host(chain) == -7).all()
    else:
        np.testing.assert_array_equal(xpmod.to_host(chain), rank_data(r - 1, 101, dtype, (2,)))


@pytest.mark.mpi(min_size=2)
def test_host_arrays_work_on_every_backend(context):
    ctx, comm = context
    out = comm.allreduce(np.full(4, ctx.rank + 1.0), "sum")
    recv = np.full(3, -1.0)
    got = comm.sendrecv(np.full(3, float(ctx.rank)), (ctx.rank + 1) % ctx.size, recv, (ctx.rank - 1) % ctx.size)
    assert isinstance(out, np.ndarray) and got is recv
    np.testing.assert_array_equal(out, np.full(4, ctx.size * (ctx.size + 1) / 2))
    np.testing.assert_array_equal(recv, np.full(3, float((ctx.rank - 1) % ctx.size)))


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("op", ["allreduce", "allgather", "reduce_scatter", "bcast"])
def test_results_land_in_a_given_out(context, op):
    """``out=``: the caller's buffer is filled (poisoned first) and returned; a wrong one is refused."""
    ctx, comm = context
    n = ctx.size
    mine = rank_data(ctx.rank, 6 * n, np.float64)
    everyone = np.stack([rank_data(r, 6 * n, np.float64) for r in range(n)])
    want = {
        "allreduce": everyone.sum(0),
        "allgather": everyone,
        "bcast": everyone[0],
        "reduce_scatter": everyone.sum(0)[ctx.rank * 6 : (ctx.rank + 1) * 6],
    }[op]
    out = ctx.xp.full(want.shape, np.nan)
    x = on_device(ctx, mine)
    run = {
        "allreduce": lambda o: comm.allreduce(x, out=o),
        "allgather": lambda o: comm.allgather(x, out=o),
        "reduce_scatter": lambda o: comm.reduce_scatter(x, out=o),
        "bcast": lambda o: comm.bcast(x, 0, out=o),
    }[op]
    got = run(out)
    with pytest.raises(ValueError, match="out has shape"):
        run(ctx.xp.empty(want.shape + (1,)))
    assert got is out
    np.testing.assert_array_equal(xpmod.to_host(out), want)
    assert np.array_equal(xpmod.to_host(x), mine)  # the input is untouched


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_to_the_last_rank_into_out(context, dtype):
    ctx, comm = context
    root = ctx.size - 1
    mine = rank_data(ctx.rank, 71, dtype, (2,))
    out = ctx.xp.full((ctx.size, 71, 2), -9, dtype=dtype) if ctx.rank == root else None
    got = comm.gather(on_device(ctx, mine), root=root, out=out)
    plain = comm.gather(on_device(ctx, mine), root=root)  # no out: a new array on the root
    comm.barrier()
    want = np.stack([rank_data(r, 71, dtype, (2,)) for r in range(ctx.size)])
    if ctx.rank == root:
        assert got is out
        check_kind(ctx, plain)
        np.testing.assert_array_equal(xpmod.to_host(out), want)
        np.testing.assert_array_equal(xpmod.to_host(plain), want)
    else:
        assert got is None and plain is None


@pytest.mark.mpi(min_size=2)
def test_subcommunicators_of_a_grid_talk_only_within_their_group(context):
    """open_subcommunicator: the rows of a 2-column grid, same backend as the parent."""
    from spmd.comm.factory import open_subcommunicator

    ctx, comm = context
    row, col = divmod(ctx.rank, 2)
    sub = open_subcommunicator(ctx, comm, color=row, key=col)
    got = sub.allreduce(on_device(ctx, np.array([ctx.rank + 1.0])))
    sub.close()
    assert sub.name == comm.name and sub.rank == col
    members = [r for r in range(ctx.size) if r // 2 == row]
    assert float(xpmod.to_host(got)[0]) == sum(r + 1.0 for r in members)

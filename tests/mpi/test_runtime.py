"""Context.agree under MPI: a failure on one rank reaches every rank, never a hang."""

import pytest

from spmd.core.errors import InputError, SpmdError
from spmd.core.runtime import Context


@pytest.fixture(scope="module")
def ctx(world):
    context = Context(world.Dup())
    yield context
    context.close()


def fail_on_last(rank, size, exc):
    if rank == size - 1:
        raise exc
    return rank


@pytest.mark.mpi(min_size=2)
def test_an_spmd_error_on_one_rank_is_raised_on_every_rank_naming_it(ctx):
    with pytest.raises(InputError, match=rf"^rank {ctx.size - 1} on .*: shard missing$") as info:
        ctx.agree(fail_on_last, ctx.rank, ctx.size, InputError("shard missing"))
    assert info.value.collective
    assert ctx.agree(lambda: ctx.rank) == ctx.rank  # the ranks are still in step


@pytest.mark.mpi(min_size=2)
def test_a_bug_on_one_rank_is_an_internal_error_on_every_rank(ctx):
    """A TypeError on one rank (a device array where NumPy was expected, say) used to escape
    agree on that rank alone and leave the others waiting in the allgather."""
    with pytest.raises(SpmdError, match=rf"^rank {ctx.size - 1} on .*: internal error: TypeError: no host copy$"):
        ctx.agree(fail_on_last, ctx.rank, ctx.size, TypeError("no host copy"))
    assert ctx.agree(lambda: ctx.rank) == ctx.rank


@pytest.mark.parametrize("op", ["sum", "min", "max"])
def test_allreduce_host_reduces_every_array_in_place(ctx, op):
    import numpy as np

    mine = [np.arange(5.0) * (ctx.rank + 1) - ctx.rank, np.array([ctx.rank], dtype=np.int64)]
    everyone = [[np.arange(5.0) * (r + 1) - r, np.array([r], dtype=np.int64)] for r in range(ctx.size)]
    ctx.allreduce_host(*mine, op=op)
    reduce = {"sum": np.sum, "min": np.min, "max": np.max}[op]
    for got, parts in zip(mine, zip(*everyone)):
        np.testing.assert_array_equal(got, reduce(np.stack(parts), axis=0))


def test_a_context_closes_at_the_end_of_its_block_and_on_an_agreed_error(world):
    from mpi4py import MPI

    with Context(world.Dup()) as ctx:
        ctx.agree(lambda: None)
    assert ctx.comm == MPI.COMM_NULL and ctx.node_comm == MPI.COMM_NULL
    ctx.close()  # closing twice does nothing
    with pytest.raises(InputError):
        with Context(world.Dup()) as ctx:
            ctx.agree(fail_on_last, ctx.rank, ctx.size, InputError("shard missing"))
    assert ctx.comm == MPI.COMM_NULL  # every rank got the agreed error: closing (collective) was safe


def test_a_context_stays_open_on_an_error_of_this_rank_alone(world):
    """Closing is collective: after a lone error (the job is about to be aborted) it would wait for ranks
    that never come, so the block leaves it open."""
    from mpi4py import MPI

    ctx = Context(world.Dup())
    with pytest.raises(RuntimeError):
        with ctx:
            raise RuntimeError("only here")
    with pytest.raises(InputError):
        with ctx:
            raise InputError("not agreed")  # an SpmdError, but not marked collective
    assert ctx.comm != MPI.COMM_NULL
    ctx.close()

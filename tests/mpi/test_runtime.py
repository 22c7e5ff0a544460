"""Context.agree under MPI: a failure on one rank reaches every rank, never a hang."""

import pytest

from spmd.errors import InputError, SpmdError
from spmd.runtime import Context


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

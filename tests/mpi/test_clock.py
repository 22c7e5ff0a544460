"""One clock for every rank (spmd.core.clock) under MPI: offsets agreed by ping-pong, known on every rank, and good to
their stated uncertainty: a barrier's exit, read on each rank's own clock and moved to rank 0's, happens at one
moment on every rank."""

import time

import numpy as np
import pytest

from spmd.core.clock import agree_clock


@pytest.mark.mpi(min_size=2)
def test_every_rank_knows_every_offset_and_rank_0_is_the_reference(world):
    clock = agree_clock(world)
    tables = world.allgather((clock.offsets, clock.uncertainties))
    assert all(t == tables[0] for t in tables)
    assert clock.offsets[0] == 0.0 and clock.uncertainties[0] == 0.0
    assert clock.offset == clock.offsets[world.Get_rank()]
    assert all(0.0 < u < 0.05 for u in clock.uncertainties[1:])


@pytest.mark.mpi(min_size=2)
def test_the_moments_ranks_leave_a_barrier_agree_on_the_shared_clock(world):
    """Each rank leaves Barrier no earlier than the last rank entered it; on one host the exits lie within
    scheduling noise of each other. Ten barriers: the median spread of the exits, moved to rank 0's clock, is small,
    and no rank's exit precedes the latest entry by more than the offsets' uncertainty."""
    clock = agree_clock(world)
    spreads, early = [], []
    for _ in range(10):
        entered = clock.shared(time.perf_counter())
        world.Barrier()
        left = clock.shared(time.perf_counter())
        both = world.allgather((entered, left))
        last_in = max(e for e, _ in both)
        spreads.append(max(x for _, x in both) - min(x for _, x in both))
        early.append(max(last_in - x for _, x in both))
    slack = 2 * max(clock.uncertainties)
    assert np.median(spreads) < 0.05
    assert min(early) <= slack  # in the quietest of the ten, no exit before the last entry beyond the uncertainty

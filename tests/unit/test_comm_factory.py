"""Communicators kept across a sweep's runs (spmd.comm.factory.kept_communicators): inside the block an NCCL
communicator a run opens and closes stays open for the next run on the same ranks, host MPI's never; the block's end
closes each once, and a block left by an exception closes none (a failing job's communicator may not close)."""

from __future__ import annotations

import pytest
from mpi4py import MPI

from spmd.comm import factory
from spmd.comm.mpi import MPICommunicator
from spmd.comm.nccl import NCCLCommunicator
from spmd.core.runtime import Context


class FakeNCCL(MPICommunicator):
    """Host MPI underneath, NCCL's name: what the factory keeps, counted."""

    name = "nccl"
    made: list = []

    def __init__(self, mpi_comm):
        super().__init__(mpi_comm)
        self.closed = 0
        FakeNCCL.made.append(self)

    def close(self):
        if not self.kept:
            self.closed += 1


@pytest.fixture
def backends(monkeypatch):
    FakeNCCL.made = []
    monkeypatch.setitem(factory.BACKENDS, "nccl", FakeNCCL)
    monkeypatch.setattr(factory, "_checked", lambda requested, device, shared: requested)
    with Context(MPI.COMM_SELF) as ctx:
        yield ctx


def test_a_sweeps_runs_on_the_same_ranks_share_one_nccl_communicator_closed_once_at_the_end(backends):
    ctx = backends
    with factory.kept_communicators():
        first = factory.open_communicator(ctx, "nccl")
        first.close()  # the run ends: kept open
        again = factory.open_communicator(ctx, "nccl")
        assert again is first and first.closed == 0
        mpi = [factory.open_communicator(ctx, "mpi") for _ in range(2)]
        assert mpi[0] is not mpi[1] and not mpi[0].kept  # cheap to open again: never kept
    assert FakeNCCL.made == [first] and first.closed == 1 and not first.kept
    outside = [factory.open_communicator(ctx, "nccl") for _ in range(2)]
    assert outside[0] is not outside[1] and not outside[0].kept


def test_a_block_left_by_an_exception_closes_nothing_and_keeps_nothing_after(backends):
    ctx = backends
    with pytest.raises(RuntimeError), factory.kept_communicators():
        comm = factory.open_communicator(ctx, "nccl")
        raise RuntimeError("a run failed")
    assert comm.closed == 0 and factory._kept is None


def test_a_kept_nccl_communicator_is_not_destroyed_by_its_runs_close():
    class Handle:
        destroyed = 0

        def destroy(self):
            Handle.destroyed += 1

    comm = NCCLCommunicator.__new__(NCCLCommunicator)  # no GPU here: the close path alone
    comm.comm, comm.kept = Handle(), True
    comm.close()
    assert Handle.destroyed == 0 and comm.comm is not None
    comm.kept = False
    comm.close()
    assert Handle.destroyed == 1 and comm.comm is None

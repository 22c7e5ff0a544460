"""The MPI communicator every blocking call of spmd goes through: each call is marked as a wait
(``spmd.core.waits``), so the watchdog sees which collective a rank is stuck in and for how long."""

from __future__ import annotations

from mpi4py import MPI

from .waits import Waiting

BLOCKING = (
    "allgather",
    "allreduce",
    "alltoall",
    "barrier",
    "bcast",
    "gather",
    "reduce",
    "scatter",
    "Allgather",
    "Allgatherv",
    "Allreduce",
    "Alltoall",
    "Barrier",
    "Bcast",
    "Gather",
    "Gatherv",
    "Reduce",
    "Reduce_scatter_block",
    "Scatter",
    "Sendrecv",
    "Recv",
    "Send",
    "recv",
    "send",
    "Dup",
    "Split",
    "Split_type",
)


class WatchedComm(MPI.Intracomm):
    """An Intracomm whose blocking calls mark the rank as waiting (``Dup`` keeps the class)."""


def _watched(name: str):
    base = getattr(MPI.Intracomm, name)

    def method(self, *args, **kwargs):
        with Waiting(name):
            return base(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = base.__doc__
    return method


for _name in BLOCKING:
    setattr(WatchedComm, _name, _watched(_name))


def watched(comm: MPI.Intracomm) -> WatchedComm:
    """``comm`` as a WatchedComm (the same MPI communicator; free it through the result)."""
    return comm if isinstance(comm, WatchedComm) else WatchedComm(comm)

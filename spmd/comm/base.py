"""The one communicator interface every backend implements.

Arrays in, arrays out, on the caller's device: a CuPy array given to any backend comes
back as a CuPy array, a NumPy array as a NumPy array. Device checks stay inside comm/.
Collectives that produce a new array take ``out=``: a caller-owned result buffer (on the
caller's device, the result's shape and dtype), filled and returned. Preallocating it is
what nccl-tests does; allocating a result per call costs ~8 us on a GPU (measured).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from ..core import xp as xpmod

OPS = ("sum", "min", "max")


class Communicator(ABC):
    """Collectives and point-to-point messages among the ranks of one MPI communicator.

    Attributes:
        name: backend name as reported ('nccl', 'mpi', 'mpi-cuda').
        rank, size: position in and size of the group.
        queues_on_stream: device collectives are queued on the current CUDA stream and return at once,
            so they can overlap with compute on other streams (host-staged MPI waits for the device in
            every call, and a CUDA-aware MPI for the stream).
        capturable: calls on device arrays can be recorded into a CUDA graph.
        kept: ``close`` leaves it open for a later run on the same ranks (``factory.kept_communicators``).
    """

    name = "base"
    queues_on_stream = False
    capturable = False
    kept = False

    def __init__(self, mpi_comm):
        self.rank = mpi_comm.Get_rank()
        self.size = mpi_comm.Get_size()

    @abstractmethod
    def allreduce(self, x, op: str = "sum", out=None):
        """Element-wise reduction of ``x`` over all ranks (op: sum, min, max)."""

    @abstractmethod
    def allgather(self, x, out=None):
        """Every rank's ``x`` stacked along a new first axis: shape (size, *x.shape)."""

    @abstractmethod
    def gather(self, x, root: int = 0, out=None):
        """Every rank's ``x`` stacked on rank ``root``: shape (size, *x.shape) there, None elsewhere."""

    @abstractmethod
    def reduce_scatter(self, x, op: str = "sum", out=None):
        """Reduce ``x`` over ranks and give rank r the r-th of ``size`` equal row blocks."""

    @abstractmethod
    def bcast(self, x, root: int = 0, out=None):
        """Rank ``root``'s ``x`` on every rank (``x`` gives shape and dtype elsewhere)."""

    @abstractmethod
    def sendrecv(self, send, dest: int | None, recv, source: int | None):
        """Send ``send`` to ``dest`` while receiving into ``recv`` from ``source``.

        ``None`` for dest or source skips that half (a boundary rank). Returns ``recv``.
        """

    @abstractmethod
    def barrier(self) -> None:
        """Wait until every rank got here (and, on GPU, until queued work is done)."""

    def close(self) -> None:
        """Release backend resources; the communicator is unusable afterwards (unless ``kept``: then nothing)."""


def check_op(op: str) -> str:
    """Validate a reduction op name."""
    if op not in OPS:
        raise ValueError(f"reduction op {op!r} is not one of {', '.join(OPS)}")
    return op


def check_out(out, shape, dtype, like) -> None:
    """Raise ValueError unless ``out`` can hold a result of ``shape``/``dtype`` where ``like`` lives."""
    if out is None:
        return
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype:
        raise ValueError(f"out has shape {tuple(out.shape)} {out.dtype}, the result is {tuple(shape)} {dtype}")
    if xpmod.is_device_array(out) != xpmod.is_device_array(like):
        raise ValueError("out must live where the input lives (both NumPy or both CuPy)")
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")


def check_scatter_rows(x, size: int) -> int:
    """Rows each rank receives from reduce_scatter of ``x`` over ``size`` ranks."""
    if x.ndim == 0 or x.shape[0] % size:
        raise ValueError(f"reduce_scatter needs a first axis divisible by {size}, got shape {x.shape}")
    return x.shape[0] // size

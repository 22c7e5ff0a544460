"""MPI on host buffers. Device arrays are staged through pinned host memory.

This is the safe default for any MPI, CUDA-aware or not: MPI only ever sees host memory.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from ..core import xp as xpmod
from ..core.watched import watched
from .base import Communicator, check_op, check_out, check_scatter_rows

MPI_OPS = {"sum": MPI.SUM, "min": MPI.MIN, "max": MPI.MAX}


class MPICommunicator(Communicator):
    """Collectives through mpi4py's buffer interface on NumPy (or staged CuPy) arrays."""

    name = "mpi"

    def __init__(self, mpi_comm):
        super().__init__(mpi_comm)
        self.mpi = watched(mpi_comm.Dup())  # sub-communicators of a grid are plain: watch them too
        self._staging: dict[str, np.ndarray] = {}

    # Three hooks decide where MPI's buffers live; mpi_cuda overrides them.

    def _outgoing(self, x, slot: str):
        """The buffer MPI reads ``x`` from: ``x`` itself, or a pinned host copy of it."""
        if not xpmod.is_device_array(x):
            return np.ascontiguousarray(x)
        host = self._pinned(slot, x.shape, x.dtype)
        x.get(out=host)  # blocking copy on the current stream: x is complete afterwards
        return host

    def _incoming(self, shape, dtype, like, slot: str, out=None):
        """The buffer MPI writes a result of ``shape`` into (the caller's host ``out`` if given)."""
        check_out(out, shape, dtype, like)
        if xpmod.is_device_array(like):
            return self._pinned(slot, shape, dtype)
        return out if out is not None else np.empty(shape, dtype=dtype)

    def _deliver(self, buf, like, out=None):
        """The result in the caller's memory space (uploads a host buffer for a device caller)."""
        if out is not None:
            if buf is not out:
                xpmod.copy_into(out, buf)
            return out
        if xpmod.is_device_array(like) and not xpmod.is_device_array(buf):
            out = xpmod.cupy.empty(buf.shape, dtype=buf.dtype)
            out.set(buf)
            return out
        return buf

    def _pinned(self, slot: str, shape, dtype) -> np.ndarray:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        buf = self._staging.get(slot)
        if buf is None or buf.nbytes < nbytes:
            buf = xpmod.empty_host(max(nbytes, 1), np.uint8, pinned=True)
            self._staging[slot] = buf
        return buf[:nbytes].view(dtype).reshape(shape)

    # Collectives

    def allreduce(self, x, op="sum", out=None):
        send = self._outgoing(x, "send")
        recv = self._incoming(x.shape, x.dtype, x, "recv", out)
        # out=x: MPI forbids aliased buffers; in place is spelled IN_PLACE
        self.mpi.Allreduce(MPI.IN_PLACE if _same_memory(send, recv) else send, recv, op=MPI_OPS[check_op(op)])
        return self._deliver(recv, x, out)

    def allgather(self, x, out=None):
        send = self._outgoing(x, "send")
        recv = self._incoming((self.size, *x.shape), x.dtype, x, "recv", out)
        self.mpi.Allgather(send, recv)
        return self._deliver(recv, x, out)

    def gather(self, x, root=0, out=None):
        send = self._outgoing(x, "send")
        if self.rank != root:
            self.mpi.Gather(send, None, root=root)
            return None
        recv = self._incoming((self.size, *x.shape), x.dtype, x, "recv", out)
        self.mpi.Gather(send, recv, root=root)
        return self._deliver(recv, x, out)

    def reduce_scatter(self, x, op="sum", out=None):
        rows = check_scatter_rows(x, self.size)
        send = self._outgoing(x, "send")
        recv = self._incoming((rows, *x.shape[1:]), x.dtype, x, "recv", out)
        self.mpi.Reduce_scatter_block(send, recv, op=MPI_OPS[check_op(op)])
        return self._deliver(recv, x, out)

    def bcast(self, x, root=0, out=None):
        check_out(out, x.shape, x.dtype, x)
        buf = self._outgoing(x, "send")
        if buf is x:  # never overwrite the caller's array on a non-root rank
            buf = out if out is not None else (xpmod.cupy if xpmod.is_device_array(x) else np).empty_like(x)
            if self.rank == root:
                buf[...] = x
                if xpmod.is_device_array(buf):  # MPI reads it next: the copy must be done
                    xpmod.synchronize(xpmod.cupy)
        self.mpi.Bcast(buf, root=root)
        return self._deliver(buf, x, out)

    def sendrecv(self, send, dest, recv, source):
        sbuf = self._outgoing(send, "send")
        # straight into recv where MPI can write it (a contiguous array it can address)
        rbuf = self._incoming(recv.shape, recv.dtype, recv, "recv", recv if recv.flags.c_contiguous else None)
        self.mpi.Sendrecv(
            sbuf, MPI.PROC_NULL if dest is None else dest, 0, rbuf, MPI.PROC_NULL if source is None else source, 0
        )
        if source is not None and rbuf is not recv:
            xpmod.copy_into(recv, rbuf)
        return recv

    def barrier(self):
        self.mpi.Barrier()

    def close(self):
        if self.mpi != MPI.COMM_NULL:
            self.mpi.Free()
        self._staging.clear()


def _same_memory(a, b) -> bool:
    """True when two arrays start at the same address (host or device)."""

    def address(x):
        return x.data.ptr if xpmod.is_device_array(x) else x.ctypes.data

    return a is b or (a.size > 0 and address(a) == address(b))

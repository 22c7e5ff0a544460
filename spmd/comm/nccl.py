"""NCCL through ``cupy.cuda.nccl``: device buffers, ordered on the current CUDA stream.

The NCCL unique id travels over MPI from rank 0; after that MPI carries no data.
Host (NumPy) arrays are accepted for uniformity: uploaded, reduced, brought back.
Every NCCL call is marked for the watchdog: enqueueing is asynchronous, except that NCCL connects
peers lazily, so the first call on a pair of ranks blocks on the host until the peer joins. The
watchdog polls the open communicators for asynchronous errors and, when the job ends on an error,
aborts them: this module registers both hooks with it on import (no communicator, nothing to do).
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from ..core import watchdog
from ..core import xp as xpmod
from ..core.waits import Waiting
from .base import Communicator, check_op, check_out, check_scatter_rows

_live: list[weakref.ref] = []  # every open NCCLCommunicator: the watchdog polls and aborts them
_live_lock = threading.Lock()


def check_async_errors() -> None:
    """Raise the asynchronous error of any open NCCL communicator (a peer died, a network
    failure). Safe from another thread: close() and abort_all() hold the same lock."""
    with _live_lock:
        for ref in _live:
            owner = ref()
            if owner is not None and owner.comm is not None:
                owner.comm.check_async_error()


def abort_all(deadline_s: float = 5.0) -> bool:
    """Abort every open NCCL communicator, so kernels waiting on a dead peer return and nothing
    leaks, before the job is ended with an error. ncclCommAbort can itself block (beside a wedged
    peer), so it runs in a thread given ``deadline_s``: the job
    ends either way. Returns True when every abort returned."""

    def abort():
        with _live_lock:
            for ref in _live:
                owner = ref()
                if owner is not None and owner.comm is not None:
                    comm, owner.comm = owner.comm, None
                    try:
                        comm.abort()
                    except Exception:  # already broken: the process is ending anyway
                        pass
            _live.clear()

    if not any(ref() is not None for ref in _live):
        return True
    worker = threading.Thread(target=abort, name="spmd-nccl-abort", daemon=True)
    worker.start()
    worker.join(deadline_s)
    return not worker.is_alive()


watchdog.on_poll("NCCL asynchronous error", check_async_errors)
watchdog.on_abort("ncclCommAbort", abort_all)


def nccl_module():
    """``cupy.cuda.nccl`` if CuPy was built with NCCL and the library loads, else None."""
    if xpmod.cupy is None:
        return None
    try:
        from cupy.cuda import nccl

        nccl.get_version()
        return nccl
    except Exception:  # ImportError, or the NCCL shared library is missing
        return None


GRAPH_MIXING = "NCCL_GRAPH_MIXING_SUPPORT"


def graph_mixing_setting() -> str:
    """NCCL_GRAPH_MIXING_SUPPORT for this process, "0" unless the environment says otherwise; set before NCCL's
    first call, which reads it. NCCL's support for graph-captured and uncaptured calls outstanding at once on one
    communicator costs every replay of train's captured step time (docs/benchmarks.md), and spmd never
    has both outstanding: a window of replays ends in a synchronize before any uncaptured call. A plug-in that
    does keep both outstanding sets NCCL_GRAPH_MIXING_SUPPORT=1."""
    return os.environ.setdefault(GRAPH_MIXING, "0")


class NCCLCommunicator(Communicator):
    """Collectives and send/recv over an NCCL communicator spanning the MPI group."""

    name = "nccl"
    queues_on_stream = True
    capturable = True

    def __init__(self, mpi_comm):
        super().__init__(mpi_comm)
        self.graph_mixing = graph_mixing_setting()
        self._nccl = nccl_module()
        uid = self._nccl.get_unique_id() if self.rank == 0 else None
        uid = mpi_comm.bcast(uid, root=0)
        with Waiting("nccl init"):
            self.comm = self._nccl.NcclCommunicator(self.size, uid, self.rank)
        with _live_lock:
            _live[:] = [ref for ref in _live if ref() is not None] + [weakref.ref(self)]
        self._ops = {"sum": self._nccl.NCCL_SUM, "min": self._nccl.NCCL_MIN, "max": self._nccl.NCCL_MAX}
        self._types = {
            np.dtype(name): getattr(self._nccl, const)
            for name, const in (
                ("int8", "NCCL_INT8"),
                ("uint8", "NCCL_UINT8"),
                ("int32", "NCCL_INT32"),
                ("uint32", "NCCL_UINT32"),
                ("int64", "NCCL_INT64"),
                ("uint64", "NCCL_UINT64"),
                ("float16", "NCCL_FLOAT16"),
                ("float32", "NCCL_FLOAT32"),
                ("float64", "NCCL_FLOAT64"),
            )
            if hasattr(self._nccl, const)
        }

    def _dtype(self, dtype) -> int:
        try:
            return self._types[np.dtype(dtype)]
        except KeyError:
            raise TypeError(f"NCCL cannot carry dtype {dtype}") from None

    @staticmethod
    def _stream() -> int:
        return xpmod.cupy.cuda.get_current_stream().ptr

    @staticmethod
    def _on_device(x):
        if isinstance(x, xpmod.cupy.ndarray) and x.flags.c_contiguous:
            return x  # the common case, kept cheap: small collectives are bound by host time
        return xpmod.cupy.ascontiguousarray(xpmod.cupy.asarray(x))  # uploads a NumPy array

    @staticmethod
    def _result(out, shape, dtype, like):
        """Where NCCL writes: the caller's device ``out``, else a new device array."""
        if out is not None:
            check_out(out, shape, dtype, like)
            if xpmod.is_device_array(out):
                return out
        return xpmod.cupy.empty(shape, dtype=dtype)

    @staticmethod
    def _deliver(buf, like, out=None):
        if out is not None and out is not buf:  # a host caller's out
            out[...] = xpmod.to_host(buf)
            return out
        return buf if xpmod.is_device_array(like) else xpmod.to_host(buf)

    def allreduce(self, x, op="sum", out=None):
        src = self._on_device(x)
        buf = self._result(out, src.shape, src.dtype, x)
        with Waiting("nccl allreduce"):
            self.comm.allReduce(
                src.data.ptr, buf.data.ptr, src.size, self._dtype(src.dtype), self._ops[check_op(op)], self._stream()
            )
        return self._deliver(buf, x, out)

    def allgather(self, x, out=None):
        src = self._on_device(x)
        buf = self._result(out, (self.size, *src.shape), src.dtype, x)
        with Waiting("nccl allgather"):
            self.comm.allGather(src.data.ptr, buf.data.ptr, src.size, self._dtype(src.dtype), self._stream())
        return self._deliver(buf, x, out)

    def gather(self, x, root=0, out=None):
        # NCCL has no gather: the root receives every rank's block in one group of recvs.
        src = self._on_device(x)
        stream = self._stream()
        if self.rank != root:
            with Waiting("nccl gather"):
                self._nccl.groupStart()
                self.comm.send(src.data.ptr, src.size, self._dtype(src.dtype), root, stream)
                self._nccl.groupEnd()
            return None
        buf = self._result(out, (self.size, *src.shape), src.dtype, x)
        with Waiting("nccl gather"):
            self._nccl.groupStart()
            for peer in range(self.size):
                if peer != root:
                    self.comm.recv(buf[peer].data.ptr, src.size, self._dtype(src.dtype), peer, stream)
            self._nccl.groupEnd()
        buf[root] = src
        return self._deliver(buf, x, out)

    def reduce_scatter(self, x, op="sum", out=None):
        rows = check_scatter_rows(x, self.size)
        src = self._on_device(x)
        buf = self._result(out, (rows, *src.shape[1:]), src.dtype, x)
        with Waiting("nccl reduce_scatter"):
            self.comm.reduceScatter(
                src.data.ptr, buf.data.ptr, buf.size, self._dtype(src.dtype), self._ops[check_op(op)], self._stream()
            )
        return self._deliver(buf, x, out)

    def bcast(self, x, root=0, out=None):
        src = self._on_device(x)
        buf = self._result(out, src.shape, src.dtype, x)
        with Waiting("nccl bcast"):
            self.comm.broadcast(src.data.ptr, buf.data.ptr, buf.size, self._dtype(buf.dtype), root, self._stream())
        return self._deliver(buf, x, out)

    def sendrecv(self, send, dest, recv, source):
        sbuf = self._on_device(send)
        rbuf = (
            recv
            if xpmod.is_device_array(recv) and recv.flags.c_contiguous
            else xpmod.cupy.empty(recv.shape, dtype=recv.dtype)
        )
        stream = self._stream()
        with Waiting("nccl sendrecv"):
            self._nccl.groupStart()
            if dest is not None:
                self.comm.send(sbuf.data.ptr, sbuf.size, self._dtype(sbuf.dtype), dest, stream)
            if source is not None:
                self.comm.recv(rbuf.data.ptr, rbuf.size, self._dtype(rbuf.dtype), source, stream)
            self._nccl.groupEnd()
        if source is not None and rbuf is not recv:
            xpmod.copy_into(recv, rbuf)
        return recv

    def barrier(self):
        token = xpmod.cupy.ones(1, dtype=np.int32)
        with Waiting("nccl barrier"):
            self.comm.allReduce(
                token.data.ptr, token.data.ptr, 1, self._dtype(token.dtype), self._ops["sum"], self._stream()
            )
            xpmod.cupy.cuda.get_current_stream().synchronize()
        self.comm.check_async_error()

    def close(self):
        if self.kept:  # a later run on the same ranks uses it (factory.kept_communicators)
            return
        with _live_lock:  # never while the watchdog polls it
            if self.comm is not None:
                self.comm.destroy()
                self.comm = None

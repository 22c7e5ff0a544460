"""The factory: which backend ``comm:`` means here, whether it can run, and opening it on every rank.

``comm: auto`` = NCCL on GPU, host MPI on CPU. ``mpi-cuda`` only with proof that the
MPI library is CUDA-aware. Availability is agreed on every rank before any backend's
collective set-up starts, so a backend missing on one rank cannot hang the others.
"""

from __future__ import annotations

import contextlib

from mpi4py import MPI

from ..core.config import COMM_BACKENDS
from ..core.errors import BackendUnavailable
from .base import Communicator
from .mpi import MPICommunicator
from .mpi_cuda import CudaAwareMPICommunicator, require_cuda_aware_mpi
from .nccl import NCCLCommunicator, nccl_module

_CLASSES = {cls.name: cls for cls in (NCCLCommunicator, MPICommunicator, CudaAwareMPICommunicator)}
BACKENDS: dict[str, type[Communicator]] = {name: _CLASSES[name] for name in COMM_BACKENDS}


def resolve_backend(requested: str, device: str, shared_gpu: bool = False) -> str:
    """The backend name ``comm: requested`` means for a job on ``device``.

    NCCL refuses two ranks on one GPU, so ``auto`` falls back to host MPI when GPUs are shared.
    """
    if requested == "auto":
        return "nccl" if device == "gpu" and not shared_gpu else "mpi"
    if requested not in BACKENDS:
        raise BackendUnavailable(f"comm: unknown backend {requested!r} (one of auto, {', '.join(BACKENDS)})")
    return requested


def check_backend(name: str, device: str, shared_gpu: bool = False) -> None:
    """Raise BackendUnavailable if backend ``name`` cannot run on this rank."""
    if name == "mpi-cuda":
        require_cuda_aware_mpi()
    if name in ("nccl", "mpi-cuda") and device != "gpu":
        raise BackendUnavailable(f"comm: {name} needs device: gpu, but this job runs on the CPU")
    if name == "nccl" and shared_gpu:
        raise BackendUnavailable(
            "comm: nccl cannot run several ranks on one GPU (NCCL refuses duplicate "
            "devices); use comm: mpi (or auto), or one rank per GPU"
        )
    if name == "nccl" and nccl_module() is None:
        raise BackendUnavailable("comm: nccl needs CuPy with NCCL (install spmd[cuda12] or spmd[cuda13])")


# kept open across a sweep's runs: opening an NCCL communicator took about 0.2 s and destroying it 0.5 s a run (NCCL
# 2.28 on two H200s); host MPI's cost nothing to open again
KEPT_BACKENDS = ("nccl",)
_kept: dict | None = None  # inside kept_communicators: (backend, world ranks, GPU) -> its open communicator


@contextlib.contextmanager
def kept_communicators():
    """Within the block, an NCCL communicator that a run opens stays open when the run closes it, and a later run on
    the same ranks and GPU gets it again (a sweep's runs of one size). The block's end closes them; a block left by
    an exception leaves them to the process's end (the job is failing, and a broken communicator may not close)."""
    global _kept
    outer, _kept = _kept, {}
    try:
        yield
    except BaseException:
        _kept = outer
        raise
    kept, _kept = _kept, outer
    for comm in kept.values():
        comm.kept = False
        comm.close()


def open_communicator(ctx, requested: str) -> Communicator:
    """Create the communicator for ``ctx`` after every rank agreed it is available (inside ``kept_communicators``,
    the one an earlier run on the same ranks left open, where there is one)."""
    name = ctx.agree(lambda: _checked(requested, ctx.device, ctx.shared_gpu))
    if _kept is None or name not in KEPT_BACKENDS:
        return BACKENDS[name](ctx.comm)
    key = (name, tuple(ctx.comm.allgather(MPI.COMM_WORLD.Get_rank())), ctx.device_id)
    if key not in _kept:
        _kept[key] = BACKENDS[name](ctx.comm)
        _kept[key].kept = True
    return _kept[key]


def _checked(requested: str, device: str, shared_gpu: bool) -> str:
    name = resolve_backend(requested, device, shared_gpu)
    check_backend(name, device, shared_gpu)
    return name


def open_subcommunicator(ctx, comm: Communicator, color: int, key: int) -> Communicator:
    """A communicator of ``comm``'s backend over the ranks of ``ctx`` that share ``color``
    (ordered by ``key``): the rows and columns of a process grid. Collective over ``ctx``."""
    sub = ctx.comm.Split(color, key)
    try:
        return type(comm)(sub)
    finally:
        sub.Free()

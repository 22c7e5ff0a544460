"""Device buffers straight to a CUDA-aware MPI.

Only used when configured (``comm: mpi-cuda``) AND the loaded MPI library itself says it
is CUDA-aware: a non-CUDA-aware MPI handed a device pointer segfaults, so without proof
spmd refuses with BackendUnavailable before any device buffer reaches MPI.
"""

from __future__ import annotations

import ctypes

from .. import xp as xpmod
from ..errors import BackendUnavailable
from .base import check_out
from .mpi import MPICommunicator


class CudaAwareMPICommunicator(MPICommunicator):
    """MPI collectives on CuPy arrays without staging (MPI reads device memory itself)."""

    name = "mpi-cuda"

    def __init__(self, mpi_comm):
        require_cuda_aware_mpi()  # guard here too: direct use must never reach a segfault
        super().__init__(mpi_comm)

    def _outgoing(self, x, slot):
        if not xpmod.is_device_array(x):
            return super()._outgoing(x, slot)
        x = xpmod.cupy.ascontiguousarray(x)  # may queue a copy: synchronize after it
        # MPI is not stream-aware: the data must be complete before MPI reads it.
        xpmod.cupy.cuda.get_current_stream().synchronize()
        return x

    def _incoming(self, shape, dtype, like, slot, out=None):
        if xpmod.is_device_array(like):
            check_out(out, shape, dtype, like)
            return out if out is not None else xpmod.cupy.empty(shape, dtype=dtype)
        return super()._incoming(shape, dtype, like, slot, out)


def loaded_mpi_libraries() -> list[str]:
    """Paths of the libmpi shared objects mapped into this process (the MPI mpi4py uses)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/libmpi" in line}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and ".so" in p)


def require_cuda_aware_mpi() -> None:
    """Raise BackendUnavailable unless the loaded MPI proves it is CUDA-aware."""
    aware, how = cuda_aware_mpi()
    if not aware:
        raise BackendUnavailable(f"comm: mpi-cuda needs a CUDA-aware MPI, and this one is not ({how})")


def cuda_aware_mpi() -> tuple[bool, str]:
    """Ask the loaded MPI library whether it handles CUDA device buffers.

    Open MPI answers ``MPIX_Query_cuda_support()``, MPICH ``MPIX_GPU_query_support``
    (MPICH also exports the Open MPI call). Every query the library has must say yes.

    Returns:
        (is CUDA-aware, how that was established: the library and each answer).
    """
    from mpi4py import MPI  # noqa: F401  (make sure MPI is loaded and initialized)

    libraries = loaded_mpi_libraries()
    if not libraries:
        return False, "no libmpi is mapped into this process, so it cannot be asked"
    answers = []
    for path in libraries:
        lib = ctypes.CDLL(path)
        if hasattr(lib, "MPIX_Query_cuda_support"):
            answers.append((path, "MPIX_Query_cuda_support()", int(lib.MPIX_Query_cuda_support())))
        if hasattr(lib, "MPIX_GPU_query_support"):
            value = ctypes.c_int(0)
            rc = lib.MPIX_GPU_query_support(0, ctypes.byref(value))  # 0 = MPIX_GPU_SUPPORT_CUDA
            answers.append((path, "MPIX_GPU_query_support(CUDA)", value.value if rc == 0 else 0))
    if not answers:
        return False, f"{', '.join(libraries)} has no CUDA-support query (MPIX_Query_cuda_support)"
    how = "; ".join(f"{path}: {call} = {value}" for path, call, value in answers)
    return all(value == 1 for _, _, value in answers), how

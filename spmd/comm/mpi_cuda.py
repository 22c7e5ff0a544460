"""Device buffers straight to a CUDA-aware MPI.

Only used when configured (``comm: mpi-cuda``) AND the loaded MPI library itself says it
is CUDA-aware: a non-CUDA-aware MPI handed a device pointer segfaults, so without proof
spmd refuses with BackendUnavailable before any device buffer reaches MPI.
"""

from __future__ import annotations

import ctypes

from ..core import xp as xpmod
from ..core.errors import BackendUnavailable
from ..core.libraries import loaded_libraries
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


def require_cuda_aware_mpi() -> None:
    """Raise BackendUnavailable unless the loaded MPI proves it is CUDA-aware."""
    aware, how = cuda_aware_mpi()
    if not aware:
        raise BackendUnavailable(f"comm: mpi-cuda needs a CUDA-aware MPI, and this one is not ({how})")


def cuda_aware_mpi() -> tuple[bool, str]:
    """Ask the loaded MPI library whether it handles CUDA device buffers.

    Open MPI answers ``MPIX_Query_cuda_support()``, MPICH ``MPIX_GPU_query_support``
    (MPICH also exports the Open MPI call). Every query the library has must say yes.
    Open MPI 4.1's query only says how it was built, so its run-time switch is read too:
    ``opal_cuda_support`` in libopen-pal, which Open MPI clears when it cannot load libcuda
    and which ``--mca opal_cuda_support 0`` clears. Either way device buffers would crash it.

    Returns:
        (is CUDA-aware, how that was established: the library and each answer).
    """
    from mpi4py import MPI  # noqa: F401  (make sure MPI is loaded and initialized)

    libraries = loaded_libraries("/libmpi")  # the MPI mpi4py loaded, whatever else is installed
    if not libraries:
        return False, "no libmpi is mapped into this process, so it cannot be asked"
    answers = [answer for path in libraries for answer in queries(path)]
    if not answers:
        return False, f"{', '.join(libraries)} has no CUDA-support query (MPIX_Query_cuda_support)"
    for path in loaded_libraries("/libopen-pal"):  # Open MPI's portability layer: the run-time switch
        switch = run_time_switch(path)
        if switch is not None:
            answers.append((path, "opal_cuda_support (at run time)", switch))
    how = "; ".join(f"{path}: {call} = {value}" for path, call, value in answers)
    return all(value == 1 for _, _, value in answers), how


def queries(path: str) -> list[tuple[str, str, int]]:
    """(path, call, answer) of each CUDA-support query the library at ``path`` exports."""
    lib = ctypes.CDLL(path)
    answers = []
    if hasattr(lib, "MPIX_Query_cuda_support"):
        answers.append((path, "MPIX_Query_cuda_support()", int(lib.MPIX_Query_cuda_support())))
    if hasattr(lib, "MPIX_GPU_query_support"):
        value = ctypes.c_int(0)
        rc = lib.MPIX_GPU_query_support(0, ctypes.byref(value))  # 0 = MPIX_GPU_SUPPORT_CUDA
        answers.append((path, "MPIX_GPU_query_support(CUDA)", value.value if rc == 0 else 0))
    return answers


def run_time_switch(path: str) -> int | None:
    """Open MPI's ``opal_cuda_support`` in the libopen-pal at ``path`` (None: no such symbol)."""
    try:
        return int(ctypes.c_bool.in_dll(ctypes.CDLL(path), "opal_cuda_support").value)
    except ValueError:
        return None

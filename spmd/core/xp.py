"""Array backend shim: the same code runs on CuPy (GPU) and NumPy (CPU).

CuPy is optional: importing this module never fails and never touches a GPU.
"""

from __future__ import annotations

import numpy as np

from .waits import Waiting

try:  # optional dependency: an ``available`` flag instead of an import error
    import cupy
    import cupyx
except ImportError:  # pragma: no cover - depends on the machine
    cupy = None
    cupyx = None


def gpu_count() -> int:
    """Number of CUDA devices CuPy sees (0 without CuPy, a driver, or devices)."""
    if cupy is None:
        return 0
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no driver / no device: CuPy raises CUDARuntimeError
        return 0


def array_module(device: str):
    """``cupy`` for device 'gpu', ``numpy`` for 'cpu'."""
    return cupy if device == "gpu" else np


def is_device_array(a) -> bool:
    """True for a CuPy array living in GPU memory."""
    return cupy is not None and isinstance(a, cupy.ndarray)


def synchronize(xp) -> None:
    """Wait for all queued device work, on every stream (no-op on NumPy): workloads that run
    their own streams (train's compute and communication streams) are done when this returns."""
    if xp is not np:
        with Waiting("device synchronize"):  # where NCCL work that waits on a peer blocks the host
            xp.cuda.Device().synchronize()


def to_host(a) -> np.ndarray:
    """A NumPy copy (or the array itself if it is already on the host)."""
    if not is_device_array(a):
        return np.asarray(a)
    with Waiting("device to host copy"):
        return cupy.asnumpy(a)


def copy_into(dst, src) -> None:
    """``dst[...] = src`` wherever each lives (host or device)."""
    if not is_device_array(dst):
        dst[...] = to_host(src)
    elif is_device_array(src):
        dst[...] = src
    else:
        dst.set(src)


def empty_host(shape, dtype, pinned: bool) -> np.ndarray:
    """A host array; page-locked when ``pinned`` so host<->device copies run at full speed."""
    if pinned and cupyx is not None:
        return cupyx.empty_pinned(shape, dtype=dtype)
    return np.empty(shape, dtype=dtype)


def device_identity(index: int) -> str:
    """A string that identifies a physical GPU across processes (UUID, else PCI bus id)."""
    props = cupy.cuda.runtime.getDeviceProperties(index)
    uuid = props.get("uuid")
    if uuid:
        return "GPU-" + bytes(uuid).hex()
    return cupy.cuda.Device(index).pci_bus_id


def device_name(index: int) -> str:
    """Marketing name of GPU ``index`` (e.g. 'NVIDIA H200')."""
    name = cupy.cuda.runtime.getDeviceProperties(index)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def device_pci_bus_id(index: int) -> str:
    """PCI bus id of GPU ``index`` ('0000:1b:00.0'), the key NVML knows it by."""
    return cupy.cuda.Device(index).pci_bus_id.lower()


def release_memory() -> None:
    """Return the memory CuPy's pools cache to the driver (between runs of a sweep); nothing where CuPy sees no
    device (a CPU node of the same software, or CUDA_VISIBLE_DEVICES empty), whose pools would raise."""
    if cupy is not None and gpu_count():
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()


def set_tf32(enabled: bool) -> None:
    """Let CuPy's float32 matmul use TF32 tensor cores (or not); process-wide."""
    from cupy._core import _routines_linalg as linalg

    mode = linalg.COMPUTE_TYPE_TF32 if enabled else linalg.COMPUTE_TYPE_DEFAULT
    linalg.set_compute_type(np.float32, mode)

"""The shared libraries this process has loaded (not what a search path would find), and the CUDA driver's API."""

from __future__ import annotations

import functools


def loaded_libraries(fragment: str) -> list[str]:
    """Sorted paths of the shared objects mapped into this process whose path holds ``fragment``
    (``/proc/self/maps``; empty where it cannot be read)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if fragment in line}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and ".so" in p)


@functools.cache
def cuda_driver():
    """The CUDA driver API through cuda-bindings (``cuda.bindings.driver``, NVIDIA's maintained bindings), for
    calls CuPy does not wrap; None where that package is not installed. Its calls load libcuda on first use."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    return driver


def require_driver():
    """``cuda_driver()``, or OSError where cuda-bindings is not installed."""
    driver = cuda_driver()
    if driver is None:
        raise OSError("the CUDA driver's Python bindings (cuda-bindings) are not installed")
    return driver


def driver_call(name: str, *args):
    """``cuda_driver().name(*args)``, its CUresult checked: the value it returns (None, one, or a tuple).

    Raises:
        OSError: cuda-bindings missing, libcuda not loadable, or the call's CUresult (named) not CUDA_SUCCESS.
    """
    driver = require_driver()
    try:
        status, *values = getattr(driver, name)(*args)
    except (RuntimeError, OSError) as exc:  # libcuda not found (cuda.pathfinder's error is a RuntimeError)
        raise OSError(f"{name}: {exc}") from exc
    if status != driver.CUresult.CUDA_SUCCESS:
        raise OSError(f"{name} failed with {getattr(status, 'name', status)}")
    return None if not values else values[0] if len(values) == 1 else tuple(values)

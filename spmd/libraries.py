"""The shared libraries this process has loaded (not what a search path would find), and the CUDA driver's."""

from __future__ import annotations

import ctypes
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
    """The CUDA driver library (libcuda), for calls CuPy does not wrap; None where it does not load."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None

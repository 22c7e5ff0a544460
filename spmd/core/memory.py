"""Memory checks before allocating: a shard that cannot fit is refused with the numbers,
not left to a CUDA out-of-memory trace or the kernel's OOM killer."""

from __future__ import annotations

import os

from . import faults
from . import xp as xpmod
from .errors import InputError
from .units import fmt_bytes


def free_device_memory() -> int:
    """Bytes free on the current GPU."""
    free, _ = xpmod.cupy.cuda.runtime.memGetInfo()
    return int(free)


def available_host_memory() -> int:
    """Bytes the kernel can give without swapping (MemAvailable), else free pages."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def require_memory(need: int, where: str, ctx, what: str) -> None:
    """Refuse to allocate ``need`` bytes of ``what`` that cannot fit.

    Args:
        where: 'device' (the rank's GPU; host memory on a CPU run) or 'host'.
        ctx: the rank's Context (its device, and how many ranks share the node's host memory).

    Raises:
        InputError: with the need, what is free, and what to do.
    """
    on_gpu = where == "device" and ctx.device == "gpu"
    if on_gpu:
        free, pool = free_device_memory(), "the GPU"
    else:  # the ranks of a node share its memory: each may count on its share
        free = available_host_memory() // max(ctx.local_size, 1)
        pool = "host memory" + (f" (this rank's share: 1/{ctx.local_size})" if ctx.local_size > 1 else "")
    free = faults.visible_free_memory(free, need, where, ctx.device)
    if need > free:
        raise InputError(
            f"{what} need {fmt_bytes(need)}, {pool} has {fmt_bytes(free)} free: refused before allocating "
            f"(use more ranks or a smaller problem)"
        )

"""Mergeable statistics: count, mean, M2, min, max per column.

A moments array is float64 of shape (5, C): rows ``FIELDS``, one column per data column
(C = 1 for 1-D data). Chan's parallel formula merges two of them exactly, so the same
merge serves chunks of one rank, GPU blocks and ranks of the job.
"""

from __future__ import annotations

import math
from importlib import resources

import numpy as np

from ...core import xp as xpmod

FIELDS = ("count", "mean", "m2", "min", "max")
COUNT, MEAN, M2, MIN, MAX = range(5)
CHUNK_ELEMENTS = 1 << 24  # elements per chunk of the array-API path: bounds its float64 temporaries


def combine(a, b, xp=np):
    """Merge the moments of two disjoint sets (Chan, Golub & LeVeque), column-wise."""
    n = a[COUNT] + b[COUNT]
    safe_n = xp.where(n > 0, n, 1.0)
    delta = b[MEAN] - a[MEAN]
    wb = b[COUNT] / safe_n
    out = xp.empty_like(a)
    out[COUNT] = n
    out[MEAN] = a[MEAN] + delta * wb
    out[M2] = a[M2] + b[M2] + delta * delta * a[COUNT] * wb
    out[MIN] = xp.minimum(a[MIN], b[MIN])  # NaN propagates, as in NumPy's min
    out[MAX] = xp.maximum(a[MAX], b[MAX])
    return out


def combine_all(stack, xp=np):
    """Merge moments stacked along the first axis, in order (deterministic)."""
    total = stack[0]
    for part in stack[1:]:
        total = combine(total, part, xp)
    return total


def moments_xp(x, xp):
    """Moments of ``x`` (1-D, or 2-D per column) with array-API calls; NumPy or CuPy.

    Works in row chunks: each chunk is a two-pass mean/M2 in float64, chunks merged.
    """
    columns = 1 if x.ndim == 1 else x.shape[1]
    chunk = max(1, CHUNK_ELEMENTS // columns)
    total = None
    for start in range(0, x.shape[0], chunk):
        part = x[start : start + chunk]  # 1-D stays 1-D: full reductions, not a strided axis
        m = xp.empty((5, columns), dtype=np.float64)
        m[COUNT] = part.shape[0]
        m[MEAN] = part.sum(axis=0, dtype=np.float64) / part.shape[0]
        m[M2] = ((part - m[MEAN].reshape(part.shape[1:])) ** 2).sum(axis=0)
        m[MIN] = part.min(axis=0)
        m[MAX] = part.max(axis=0)
        total = m if total is None else combine(total, m, xp)
    return total


# Vector loads per thread per round, by input dtype, where a thread's loads land in its registers: 16 values a tile
# either way (4 float4 / 8 double2), so both kernels hold as many values in registers and fit as many blocks on an SM
DEFAULT_LOADS = {np.dtype(np.float32): 4, np.dtype(np.float64): 8}
FALLBACK_BLOCKS_PER_SM = 4  # where the occupancy cannot be asked (cuda-bindings missing)
# The ring in shared memory (moments.cu's ASYNC_STAGES): 2 rounds of 4 vector loads (16 floats or 8 doubles a
# tile), one in flight while a thread folds the other, 32 KiB a block
RING_STAGES, RING_LOADS = 2, 4
# Memory bytes a device can deliver per SM per SM clock above which the ring is the default: where memory outpaces
# what registers keep in flight (the devices on each side of it: docs/benchmarks.md's reduce notes). A device
# without the attributes to tell gets the ring (it does not depend on registers to keep bytes in flight); one
# before sm_80 never (no cp.async).
RING_BYTES_PER_SM_CLOCK = 16.0


def device_facts(device=None) -> dict:
    """What the ring's choice rests on, of the current (or given) CuPy device: its attributes (CuPy's
    ``Device().attributes``, clocks in kHz) and ``ComputeCapability`` as a number (90 for sm_90), which the
    attributes do not carry."""
    device = device or xpmod.cupy.cuda.Device()
    return {**device.attributes, "ComputeCapability": int(device.compute_capability)}


def memory_bytes_per_sm_clock(facts: dict) -> float | None:
    """Peak memory bytes a second (double data rate x bus width) per SM per SM clock; None where the device does
    not say."""
    try:
        bandwidth = 2 * facts["MemoryClockRate"] * 1e3 * facts["GlobalMemoryBusWidth"] / 8
        per_sm_clock = facts["MultiProcessorCount"] * facts["ClockRate"] * 1e3
    except KeyError:
        return None
    return bandwidth / per_sm_clock if bandwidth > 0 and per_sm_clock > 0 else None


def ring_stages(facts: dict) -> int:
    """The ring's stages spmd uses on a device with these ``device_facts``: RING_STAGES where memory outpaces what
    loads into registers keep in flight (see RING_BYTES_PER_SM_CLOCK), else 0."""
    if facts["ComputeCapability"] < 80:
        return 0
    per_clock = memory_bytes_per_sm_clock(facts)
    return RING_STAGES if per_clock is None or per_clock >= RING_BYTES_PER_SM_CLOCK else 0


class FusedMoments:
    """One-pass moments of a 1-D CuPy array with the kernel in ``moments.cu`` beside this file.

    The grid is the blocks the device holds at once (the driver's occupancy for the compiled kernel, one wave):
    each block takes an equal share by a grid-stride loop, so a grid of more blocks than are resident would run
    a second, partly empty wave. A thread's rounds of loads go through a ring in shared memory or into its
    registers as ``ring_stages`` chooses for the device; ``async_stages`` fixes that (0: registers), and ``loads``,
    ``blocks_per_sm`` and ``min_blocks`` fix a launch shape (bench/tools/fused_kernel.py sweeps them);
    ``fast_minmax=False`` takes min and max by NaN-propagating compares (moments.cu's FAST_MINMAX=0).
    """

    THREADS = 256

    def __init__(
        self,
        loads: int | None = None,
        blocks_per_sm: int | None = None,
        fast_minmax: bool = True,
        min_blocks: int = 0,
        async_stages: int | None = None,
    ):
        self.loads, self.blocks_per_sm = loads, blocks_per_sm
        self.fast_minmax, self.min_blocks, self.async_stages = fast_minmax, min_blocks, async_stages
        self._compiled: dict = {}  # dtype -> (partial kernel, final kernel, shape)

    @staticmethod
    def supports(x) -> bool:
        """The kernel takes 1-D contiguous float32/float64 device arrays, 16-byte aligned."""
        return (
            xpmod.is_device_array(x)
            and x.ndim == 1
            and x.flags.c_contiguous
            and x.dtype in DEFAULT_LOADS
            and x.data.ptr % 16 == 0
            and x.size > 0
        )

    def shape(self, dtype) -> dict:
        """The launch shape for ``dtype`` data: loads per thread, the ring's stages (0: none), blocks per SM (and
        how many are resident at once, and the registers a thread takes, where the driver says)."""
        return self._kernels(np.dtype(dtype))[2]

    def _kernels(self, dtype: np.dtype):
        if dtype not in self._compiled:
            cupy = xpmod.cupy
            facts = device_facts()
            stages = ring_stages(facts) if self.async_stages is None else self.async_stages
            loads = self.loads or (RING_LOADS if stages else DEFAULT_LOADS[dtype])
            source = resources.files(__package__).joinpath("moments.cu").read_text()
            name = "moments_partial<float>" if dtype == np.float32 else "moments_partial<double>"
            module = cupy.RawModule(
                code=source,
                options=(
                    "--std=c++14",
                    f"-DLOADS={loads}",
                    f"-DFAST_MINMAX={int(self.fast_minmax)}",
                    f"-DMIN_BLOCKS={self.min_blocks}",
                    f"-DASYNC_STAGES={stages}",
                ),
                name_expressions=(name, "moments_final"),
            )
            partial = module.get_function(name)
            resident, regs = _occupancy(partial, self.THREADS)
            per_sm = self.blocks_per_sm or resident or FALLBACK_BLOCKS_PER_SM
            shape = {"loads": loads, "stages": stages, "blocks_per_sm": per_sm, "resident_per_sm": resident}
            shape["registers"] = regs
            shape["blocks"] = facts["MultiProcessorCount"] * per_sm
            shape["per_block"] = self.THREADS * loads * (16 // dtype.itemsize)  # elements a block takes a round
            self._compiled[dtype] = (partial, module.get_function("moments_final"), shape)
        return self._compiled[dtype]

    def __call__(self, x):
        cupy = xpmod.cupy
        partial_kernel, final, shape = self._kernels(x.dtype)
        blocks = max(1, min(shape["blocks"], math.ceil(x.size / shape["per_block"])))
        partial = cupy.empty(blocks * 5, dtype=np.float64)
        partial_kernel((blocks,), (self.THREADS,), (x, np.int64(x.size), partial))
        out = cupy.empty((5, 1), dtype=np.float64)
        final((1,), (self.THREADS,), (partial, np.int32(blocks), out))
        return out


def _occupancy(function, threads: int) -> tuple[int | None, int | None]:
    """(blocks of ``threads`` resident on one SM at once, registers per thread) of a compiled CuPy kernel: the
    driver's occupancy (cuda-bindings) on the kernel's CUfunction; else worked out from its registers and the
    device's limits (registers allocated 8 a thread, per warp); (None, None) where neither can be had."""
    from ...core.libraries import cuda_driver, driver_call

    regs = getattr(function, "num_regs", None)
    ptr = getattr(getattr(function, "kernel", None), "ptr", None) or getattr(function, "ptr", None)
    driver = cuda_driver()
    if driver is not None and ptr:
        try:
            resident = driver_call("cuOccupancyMaxActiveBlocksPerMultiprocessor", driver.CUfunction(ptr), threads, 0)
            return int(resident), regs
        except OSError:
            pass
    if not regs:
        return None, None
    limits = xpmod.cupy.cuda.Device().attributes
    by_regs = limits["MaxRegistersPerMultiprocessor"] // (-(-regs // 8) * 8 * threads)
    by_threads = limits["MaxThreadsPerMultiProcessor"] // threads
    return max(1, min(by_regs, by_threads, limits.get("MaxBlocksPerMultiprocessor", 32))), regs

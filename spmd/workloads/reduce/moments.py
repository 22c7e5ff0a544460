"""Mergeable statistics: count, mean, M2, min, max per column.

A moments array is float64 of shape (5, C): rows ``FIELDS``, one column per data column
(C = 1 for 1-D data). Chan's parallel formula merges two of them exactly, so the same
merge serves chunks of one rank, GPU blocks and ranks of the job.
"""

from __future__ import annotations

import math
from importlib import resources

import numpy as np

from ... import xp as xpmod

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


class FusedMoments:
    """One-pass moments of a 1-D CuPy array with the kernel in ``moments.cu`` beside this file."""

    THREADS = 256

    def __init__(self, loads: int = 8, blocks_per_sm: int = 4, fast_minmax: bool = False):
        cupy = xpmod.cupy
        source = resources.files(__package__).joinpath("moments.cu").read_text()
        self._module = cupy.RawModule(
            code=source,
            options=("--std=c++14", f"-DLOADS={loads}", f"-DFAST_MINMAX={int(fast_minmax)}"),
            name_expressions=("moments_partial<float>", "moments_partial<double>", "moments_final"),
        )
        self._final = self._module.get_function("moments_final")
        self._per_block = self.THREADS * loads * 4  # elements a block takes per round (float32)
        self._max_blocks = cupy.cuda.Device().attributes["MultiProcessorCount"] * blocks_per_sm

    @staticmethod
    def supports(x) -> bool:
        """The kernel takes 1-D contiguous float32/float64 device arrays, 16-byte aligned."""
        return (
            xpmod.is_device_array(x)
            and x.ndim == 1
            and x.flags.c_contiguous
            and x.dtype in (np.float32, np.float64)
            and x.data.ptr % 16 == 0
            and x.size > 0
        )

    def __call__(self, x):
        cupy = xpmod.cupy
        kernel = self._module.get_function(
            "moments_partial<float>" if x.dtype == np.float32 else "moments_partial<double>"
        )
        blocks = max(1, min(self._max_blocks, math.ceil(x.size / self._per_block)))
        partial = cupy.empty(blocks * 5, dtype=np.float64)
        kernel((blocks,), (self.THREADS,), (x, np.int64(x.size), partial))
        out = cupy.empty((5, 1), dtype=np.float64)
        self._final((1,), (self.THREADS,), (partial, np.int32(blocks), out))
        return out

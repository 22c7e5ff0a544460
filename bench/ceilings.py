"""The ceilings spmd's figures are held against, measured in the same run beside them: HBM read and device copy
rates, cuBLAS GEMM rates, a host memory copy, and the event- or clock-timed median they all use."""

from __future__ import annotations

import statistics
import time

import numpy as np


def median_seconds(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Median of ``repeats`` timings of ``fn`` after ``warmup`` untimed calls: CUDA events when CuPy runs on a
    GPU (the device's own clock), perf_counter otherwise."""
    for _ in range(warmup):
        fn()
    try:
        import cupy

        gpu = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no CuPy or no driver
        gpu = False
    times = []
    for _ in range(repeats):
        if gpu:
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def alternating_seconds(fns: dict, rounds: int = 5, repeats: int = 30) -> dict:
    """{name: seconds}: each function's median over ``rounds`` rounds of ``median_seconds``, the functions taking
    turns round by round, so a drift of the clock or the memory's temperature falls on all of them alike (a gap of
    one percent between two kernels is smaller than the drift between two calls a minute apart)."""
    per_round: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            per_round[name].append(median_seconds(fn, repeats=repeats))
    return {name: statistics.median(times) for name, times in per_round.items()}


def hbm_read_TBps(x) -> float:
    """CuPy's sum over ``x``: the read ceiling of a reduction (../shared/device/NOTES.md's)."""
    return x.nbytes / median_seconds(lambda: x.sum()) / 1e12


def device_copy_TBps(nbytes: int) -> float:
    """A device-to-device copy, read once and written once: the ceiling of a stencil step's traffic."""
    import cupy

    src = cupy.ones(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    return 2 * src.nbytes / median_seconds(lambda: cupy.copyto(dst, src)) / 1e12


def host_copy_GBps(nbytes: int) -> float:
    """A host memory copy (NumPy), read once and written once: the memory ceiling of CPU array code."""
    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    return 2 * src.nbytes / median_seconds(lambda: np.copyto(dst, src), repeats=10) / 1e9


def gemm_TFLOPs(m: int, k: int, n: int, dtype, tf32: bool = False) -> float:
    """cuBLAS through CuPy at one shape: the ceiling of a GEMM-bound workload."""
    import cupy

    from spmd.core import xp as xpmod

    a = cupy.random.standard_normal((m, k), dtype=np.float64).astype(dtype)
    b = cupy.random.standard_normal((k, n), dtype=np.float64).astype(dtype)
    c = cupy.empty((m, n), dtype)
    if dtype == np.float32:
        xpmod.set_tf32(tf32)
    try:
        seconds = median_seconds(lambda: cupy.matmul(a, b, out=c), repeats=10, warmup=2)
    finally:
        xpmod.set_tf32(False)
    return 2.0 * m * k * n / seconds / 1e12

"""cuBLAS GEMM ceilings through CuPy at the local shapes spmd's matmul runs (the denominators of
docs/benchmarks.md's per-rank ratios). Prints JSON: {"m x k x n dtype[+tf32]": TFLOP/s}.

    python3 bench/gemm_ceiling.py 16384x16384x16384 8192x16384x16384
"""

import json
import sys

import cupy
import numpy as np
from hbm_ceiling import median_seconds

from spmd import xp as xpmod


def tflops(m, k, n, dtype, tf32) -> float:
    a = cupy.random.standard_normal((m, k), dtype=np.float64).astype(dtype)
    b = cupy.random.standard_normal((k, n), dtype=np.float64).astype(dtype)
    c = cupy.empty((m, n), dtype)
    if dtype == np.float32:
        xpmod.set_tf32(tf32)
    seconds = median_seconds(lambda: cupy.matmul(a, b, out=c), repeats=10, warmup=2)
    xpmod.set_tf32(False)
    return 2.0 * m * k * n / seconds / 1e12


if __name__ == "__main__":
    out = {}
    for shape in sys.argv[1:] or ["16384x16384x16384", "8192x16384x16384"]:
        m, k, n = map(int, shape.split("x"))
        for dtype, tf32 in ((np.float32, False), (np.float32, True), (np.float64, False)):
            key = f"{shape} {np.dtype(dtype).name}{'+tf32' if tf32 else ''}"
            out[key] = tflops(m, k, n, dtype, tf32)
            print(f"{key}: {out[key]:.1f} TFLOP/s", file=sys.stderr, flush=True)
            cupy.get_default_memory_pool().free_all_blocks()
    print(json.dumps(out))

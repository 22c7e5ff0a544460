"""The fused moments kernel alone, per variant, against the HBM read ceiling (GPU).

    python bench/fused_kernel.py        -> a Markdown table (median of 30 event-timed runs)
"""

import itertools
import statistics

import cupy
import numpy as np

from spmd.workloads.moments import FusedMoments


def median_seconds(fn, repeats=30, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1e3)
    return statistics.median(times)


def main():
    nbytes = 4 << 30
    data = {np.float32: cupy.random.standard_normal(nbytes // 4, dtype=cupy.float32),
            np.float64: cupy.random.standard_normal(nbytes // 8, dtype=cupy.float64)}
    ceiling = nbytes / median_seconds(lambda: data[np.float32].sum()) / 1e12
    print(f"HBM read ceiling (CuPy sum, 4 GiB float32): {ceiling:.2f} TB/s\n")
    print("| loads/thread | blocks/SM | dtype | ms | TB/s | / ceiling |")
    print("|---|---|---|---|---|---|")
    for loads, blocks in itertools.product((4, 8), (2, 4, 8)):
        kernel = FusedMoments(loads=loads, blocks_per_sm=blocks)
        for dtype, x in data.items():
            seconds = median_seconds(lambda: kernel(x))
            rate = nbytes / seconds / 1e12
            print(f"| {loads} | {blocks} | {np.dtype(dtype).name} | {seconds * 1e3:.3f} | {rate:.2f} "
                  f"| {rate / ceiling:.1%} |")


if __name__ == "__main__":
    main()

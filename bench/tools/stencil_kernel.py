"""The stencil's local step on one GPU, against its ceilings: a 16384^2 (or argv[1]^2) float32 5-point Jacobi
step by the fused kernel and by array slicing, beside the HBM read ceiling (CuPy sum, as in
../shared/device/NOTES.md) and a device-to-device copy (read once + write once, the traffic
a stencil step needs). Prints JSON.
"""

from bench.usage import answer_help

answer_help(
    __doc__, "python -m bench.tools.stencil_kernel [N] (a GPU, CuPy)"
)  # before the libraries a machine may lack

import json
import sys

import cupy
import numpy as np

from bench.ceilings import hbm_read_TBps, median_seconds
from spmd.workloads.stencil.filters import reference_filter
from spmd.workloads.stencil.kernel import BLOCK, ROWS_PER_THREAD, FusedStencil, aligned_layout

N = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
JACOBI = np.array([[0, 0.25, 0], [0.25, 0, 0.25], [0, 0.25, 0]])


def main():
    r = 1
    shape, col0 = aligned_layout(N, N, r, np.float32)
    src = cupy.random.standard_normal(shape, dtype=np.float32)
    dst = cupy.full_like(src, np.nan)
    moved = 2 * N * N * 4  # the field read once and written once
    out = {"field": f"{N}x{N} float32", "bytes_per_step": moved}
    out["hbm_read_TBps"] = hbm_read_TBps(cupy.empty(1 << 30, np.float32))
    copy_dst = cupy.empty_like(src)
    out["copy_TBps"] = 2 * src.nbytes / median_seconds(lambda: cupy.copyto(copy_dst, src)) / 1e12
    fused = FusedStencil(JACOBI, "reflect", np.float32, 0.0)
    s = median_seconds(lambda: fused.apply(src, dst, N, N, col0, (0, N, 0, N), [False] * 4))
    out["fused"] = f"block {BLOCK}, {ROWS_PER_THREAD} row(s) per thread, rows aligned to 128 B"
    out["fused_ms"] = s * 1e3
    out["fused_TBps"] = moved / s / 1e12
    variants = {}
    for vector in (1, 4):  # columns per thread: one (scalar accesses) or four (16-byte loads, a rolling window)
        for block in ((32, 8), (32, 4), (64, 4), (128, 2), (32, 16), (256, 1), (64, 2), (128, 1)):
            for rows in (1, 2, 4, 8, 16):
                k = FusedStencil(JACOBI, "reflect", np.float32, 0.0, block=block, rows_per_thread=rows, vector=vector)
                t = median_seconds(lambda: k.apply(src, dst, N, N, col0, (0, N, 0, N), [False] * 4), repeats=10)
                variants[f"{block[0]}x{block[1]}x{rows}, {vector} col"] = moved / t / 1e12
    out["variants_TBps"] = variants
    unaligned = cupy.random.standard_normal((N + 2, N + 2), dtype=np.float32)  # pitch N + 2: rows off 128 B
    t = median_seconds(lambda: fused.apply(unaligned, cupy.empty_like(unaligned), N, N, 1, (0, N, 0, N), [False] * 4))
    out["unaligned_TBps"] = moved / t / 1e12
    unaligned = None  # freed before the next allocation

    def sliced():  # what a straightforward CuPy port does: one kernel per tap and per sum
        cols = slice(col0, col0 + N)
        dst[1:-1, cols] = 0.25 * (
            src[:-2, cols] + src[2:, cols] + src[1:-1, col0 - 1 : col0 + N - 1] + src[1:-1, col0 + 1 : col0 + N + 1]
        )

    s = median_seconds(sliced, repeats=5)
    out["slicing_ms"] = s * 1e3
    out["slicing_TBps"] = moved / s / 1e12
    out["fused_vs_hbm_read"] = out["fused_TBps"] / out["hbm_read_TBps"]
    out["fused_vs_copy"] = out["fused_TBps"] / out["copy_TBps"]
    # correctness on a small field at every boundary mode, interior and edges launched apart
    small = cupy.random.standard_normal((67, 45), dtype=np.float64)
    for mode in ("reflect", "wrap", "constant"):
        k = FusedStencil(np.arange(25.0).reshape(5, 5) / 300, mode, np.float64, 1.5, vector=None)
        shape, c0 = aligned_layout(67, 45, 2, np.float64)
        a = cupy.full(shape, np.nan)
        a[2:-2, c0 : c0 + 45] = small
        b = cupy.full_like(a, np.nan)
        for region in ((2, 65, 2, 43), (0, 2, 0, 45), (65, 67, 0, 45), (2, 65, 0, 2), (2, 65, 43, 45)):
            k.apply(a, b, 67, 45, c0, region, [False] * 4)
        want = reference_filter(cupy.asnumpy(small), np.arange(25.0).reshape(5, 5) / 300, mode, 1.5, 1)
        out[f"max_error_{mode}"] = float(np.abs(cupy.asnumpy(b[2:-2, c0 : c0 + 45]) - want).max())
    print(json.dumps(out))
    print("\n".join(f"{k}: {v}" for k, v in out.items()), file=sys.stderr)


if __name__ == "__main__":
    main()

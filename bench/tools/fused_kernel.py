"""The fused moments kernel alone, per variant, against the HBM read ceiling (GPU).

python -m bench.tools.fused_kernel        -> JSON on stdout, a Markdown table on stderr (median of 30 event-timed
runs of each launch shape and input dtype)
"""

import itertools
import json
import sys

import cupy
import numpy as np

from bench.ceilings import hbm_read_TBps, median_seconds
from spmd.workloads.reduce.moments import FusedMoments


def main():
    nbytes = 4 << 30
    data = {
        np.float32: cupy.random.standard_normal(nbytes // 4, dtype=cupy.float32),
        np.float64: cupy.random.standard_normal(nbytes // 8, dtype=cupy.float64),
    }
    ceiling = hbm_read_TBps(data[np.float32])
    print(f"HBM read ceiling (CuPy sum, 4 GiB float32): {ceiling:.2f} TB/s\n", file=sys.stderr)
    print(
        "| loads/thread | blocks/SM | min/max | dtype | ms | TB/s | / ceiling |\n|---|---|---|---|---|---|---|",
        file=sys.stderr,
    )
    variants = []
    for fast, loads, blocks in itertools.product((False, True), (4, 8, 16), (2, 3, 4, 6, 8)):
        kernel = FusedMoments(loads=loads, blocks_per_sm=blocks, fast_minmax=fast)
        minmax = "min/max + NaN flag" if fast else "NaN-propagating select"
        for dtype, x in data.items():
            seconds = median_seconds(lambda: kernel(x), repeats=30)
            rate = nbytes / seconds / 1e12
            variants.append(
                {
                    "loads": loads,
                    "blocks_per_sm": blocks,
                    "minmax": minmax,
                    "dtype": np.dtype(dtype).name,
                    "ms": seconds * 1e3,
                    "TBps": rate,
                }
            )
            print(
                f"| {loads} | {blocks} | {minmax} | {np.dtype(dtype).name} | {seconds * 1e3:.3f} | {rate:.2f} | {rate / ceiling:.1%} |",
                file=sys.stderr,
            )
    print(json.dumps({"bytes": nbytes, "ceiling_TBps": ceiling, "variants": variants}))


if __name__ == "__main__":
    main()

"""The HBM read ceiling of this GPU, measured the way ../shared/device/NOTES.md did.

CuPy sum over 4 GiB float32, median of 20 event-timed runs after warm-up. Prints JSON.
"""

import json
import statistics
import sys

import cupy


def median_seconds(fn, repeats=20, warmup=3):
    """Median of ``repeats`` CUDA-event timings of ``fn`` after ``warmup`` untimed calls."""
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


def hbm_read_TBps(x) -> float:
    """Read bandwidth of CuPy's sum over ``x``: the ceiling reductions are compared with."""
    return x.nbytes / median_seconds(lambda: x.sum()) / 1e12


def main():
    n = (4 << 30) // 4
    x = cupy.random.standard_normal(n, dtype=cupy.float32)
    y = cupy.empty_like(x)
    copy_s = median_seconds(lambda: cupy.copyto(y, x))
    print(
        json.dumps(
            {
                "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                "bytes": x.nbytes,
                "sum_read_TBps": hbm_read_TBps(x),
                "copy_read_plus_write_TBps": 2 * x.nbytes / copy_s / 1e12,
            }
        )
    )


if __name__ == "__main__":
    sys.exit(main())

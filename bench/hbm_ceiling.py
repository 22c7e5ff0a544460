"""The HBM read ceiling of this GPU, measured the way ../shared/device/NOTES.md did.

CuPy sum over 4 GiB float32, median of 20 event-timed runs after warm-up. Prints JSON.
"""

import json
import statistics
import sys

import cupy


def timed(fn, repeats=20, warmup=3):
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
    n = (4 << 30) // 4
    x = cupy.random.standard_normal(n, dtype=cupy.float32)
    y = cupy.empty_like(x)
    sum_s = timed(lambda: x.sum())
    copy_s = timed(lambda: cupy.copyto(y, x))
    print(json.dumps({
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "bytes": x.nbytes,
        "sum_read_TBps": x.nbytes / sum_s / 1e12,
        "copy_read_plus_write_TBps": 2 * x.nbytes / copy_s / 1e12,
    }))


if __name__ == "__main__":
    sys.exit(main())

"""Where examples/kmeans.py's Lloyd step spends its GPU time, and other ways to write its per-cluster sums.

4M 2-D points in float64, k = 8 (the GPU size of docs/benchmarks.md). Median of 10 CUDA-event timings
after 2 warm-ups, in ms; every way of the sums is checked against the first. Prints JSON.
"""

from bench.usage import answer_help

answer_help(
    __doc__, "python -m bench.tools.kmeans_step [ROWS] (a GPU, CuPy)"
)  # before the libraries a machine may lack

import json
import sys

import cupy as cp

from bench.ceilings import median_seconds

N, D, K = 4 << 20, 2, 8


def ms(fn):
    return median_seconds(fn, repeats=10, warmup=2) * 1e3


def main():
    sys.path.insert(0, "examples")
    from kmeans import lloyd_step

    x = cp.random.uniform(0, 10, (N, D)).astype(cp.float64)
    c = x[:K].copy()
    dist = (x * x).sum(axis=1)[:, None] - 2 * x @ c.T + (c * c).sum(axis=1)[None, :]
    labels = dist.argmin(axis=1)
    onehot = (labels[:, None] == cp.arange(K)[None, :]).astype(x.dtype)
    xt = cp.ascontiguousarray(x.T)
    sums = {
        "onehot.T @ x (the example)": lambda: onehot.T @ x,
        "x.T @ onehot": lambda: (x.T @ onehot).T,
        "masked sums per cluster": lambda: cp.stack([(x * (labels == j)[:, None]).sum(axis=0) for j in range(K)]),
        "bincount with weights": lambda: cp.stack(
            [cp.bincount(labels, weights=x[:, i], minlength=K) for i in range(D)], axis=1
        ),
        "column-major, per-cluster dot": lambda: cp.stack([xt @ (labels == j).astype(x.dtype) for j in range(K)]),
    }
    want = sums["onehot.T @ x (the example)"]()
    out = {
        "points": N,
        "dims": D,
        "k": K,
        "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
        "parts_ms": {
            "distances": ms(lambda: (x * x).sum(axis=1)[:, None] - 2 * x @ c.T + (c * c).sum(axis=1)[None, :]),
            "argmin": ms(lambda: dist.argmin(axis=1)),
            "one-hot": ms(lambda: (labels[:, None] == cp.arange(K)[None, :]).astype(x.dtype)),
            "counts as onehot.sum(axis=0) (the example before)": ms(lambda: onehot.sum(axis=0)),
            "whole lloyd_step": ms(lambda: lloyd_step(x, c, cp)),
        },
        "sums_ms": {},
    }
    for name, fn in sums.items():
        ok = bool(cp.allclose(fn(), want, rtol=1e-12))
        out["sums_ms"][name] = {"ms": ms(fn), "agrees": ok}
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())

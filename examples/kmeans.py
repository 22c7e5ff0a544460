"""Lloyd's k-means on 2-D points: spmd's class form (``spmd.Workload``), for work with several collectives.

Input: a 2-D dataset, one point per row (points x dimensions, float32 or float64, at least ``k`` rows); a 1-D
input is refused by name (exit 2).

A repeat reads this rank's points once, then runs ``iterations`` Lloyd steps from the same start (the
input's first k points): each rank assigns its points to the nearest centroid and sums them per cluster
(compute), the per-cluster sums and counts are summed over the ranks in one allreduce (comm), and every
rank moves the centroids to the means. Verified against a serial NumPy k-means of the whole input from the
same start.

    spmd generate examples/kmeans.yaml && mpiexec -n 2 spmd run examples/kmeans.yaml
"""

from dataclasses import dataclass

import numpy as np

import spmd
from spmd.core.errors import ConfigError, VerificationError


@dataclass(frozen=True)
class KMeansParams:
    k: int = 8
    iterations: int = 10
    rtol: float = 1e-9  # the centroids against the serial k-means

    def __post_init__(self):
        if self.k < 1 or self.iterations < 1:
            raise ConfigError("params.k and params.iterations: must be >= 1")


def lloyd_step(x, centroids, xp):
    """Per-cluster sums and counts of the points nearest each centroid, packed: [sums (k x d), counts (k)]."""
    k = centroids.shape[0]
    distances = (x * x).sum(axis=1)[:, None] - 2 * x @ centroids.T + (centroids * centroids).sum(axis=1)[None, :]
    nearest = (distances.argmin(axis=1)[:, None] == xp.arange(k)[None, :]).astype(x.dtype)
    # The counts as a matrix-vector product, like the sums: CuPy's nearest.sum(axis=0) (4M rows into k
    # outputs) took 25 ms on an H100 where this takes well under 1 (bench/kmeans_step.py).
    counts = nearest.T @ xp.ones(x.shape[0], x.dtype)
    return xp.concatenate([(nearest.T @ x).ravel(), counts])


def move(packed, k, d, xp):
    """New centroids: each cluster's mean (a cluster left empty keeps the origin)."""
    sums, counts = packed[: k * d].reshape(k, d), packed[k * d :]
    return sums / xp.maximum(counts, 1)[:, None]


class KMeans(spmd.Workload):
    Params = KMeansParams

    def setup(self, ctx, cfg, comm):
        self.ctx, self.comm, self.params = ctx, comm, cfg.params
        self.rows = spmd.InputRows(ctx, cfg, ndims=(2,))
        self.start = self.rows.head(self.params.k).astype(np.float64)  # every rank: the same start
        self.centroids = None

    def prepare(self):
        self.rows.poison()

    def run(self, timer):
        xp, p = self.ctx.xp, self.params
        x = self.rows.read(timer)  # phases read, wait, h2d
        with timer.phase("compute"):
            x = x.astype(xp.float64)
            centroids = xp.asarray(self.start)
        k, d = centroids.shape
        for _ in range(p.iterations):
            with timer.phase("compute"):
                packed = lloyd_step(x, centroids, xp)
            with timer.phase("comm"):
                packed = self.comm.allreduce(packed)
            with timer.phase("compute"):
                centroids = move(packed, k, d, xp)
        self.centroids = centroids

    def verify(self):
        got = spmd_host(self.centroids)
        return self.ctx.agree(self._against_serial, got, root_only=True)

    def _against_serial(self, got):
        x = self.rows.whole().astype(np.float64)
        want = self.start
        for _ in range(self.params.iterations):
            want = move(lloyd_step(x, want, np), *want.shape, np)
        err = np.abs(got - want).max()
        if not err <= self.params.rtol * np.abs(want).max():
            raise VerificationError(f"centroids differ from a serial k-means by {err:.3g} (rtol {self.params.rtol:g})")
        return {"reference": "serial NumPy k-means of the whole input from the same start", "max_abs_error": float(err)}

    def check_input_finite(self):
        self.rows.check_input_finite()

    def result(self):
        return {"centroids": spmd_host(self.centroids).tolist(), "iterations": self.params.iterations}

    def problem(self):
        k, d = self.start.shape
        return {
            "bytes": int(sum(self.rows.rank_bytes)),
            "comm": [{"op": "allreduce", "bytes": (k * d + k) * 8, "calls": self.params.iterations}],
        }

    def close(self):  # also after a set-up that failed before its rows were made (a 1-D input, say)
        if getattr(self, "rows", None) is not None:
            self.rows.close()


def spmd_host(array):
    """A NumPy copy of a NumPy or CuPy array."""
    return array.get() if hasattr(array, "get") else np.asarray(array)

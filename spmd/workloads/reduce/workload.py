"""Workload ``reduce``: sum, mean, min, max, var, std of a 1-D array, or per column of a 2-D one.

Each rank reduces its rows to mergeable moments (count, mean, M2, min, max in float64),
the moments of all ranks are allgathered and merged with Chan's formula identically on
every rank. On a GPU a fused one-pass kernel reads the data once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ...core import faults
from ...core import xp as xpmod
from ...core.errors import ConfigError, InputError, VerificationError
from ...io.hdf5 import open_h5
from ..base import Workload
from ..rows import InputRows
from . import moments as mom

STAT_ATTRS = ("count", "sum", "abs_sum", "min", "max", "m2")
READ_CHUNK_ELEMENTS = 1 << 23
SUM_RTOL = 1e-10  # of sum(|x|): float64 accumulation is ~1e-13; one lost row of 1e9 is 1e-9
M2_RTOL = 1e-8


@dataclass(frozen=True)
class ReduceParams:
    """``params`` of the reduce workload.

    Attributes:
        ddof: delta degrees of freedom of var/std (0: population, 1: sample).
        method: 'fused' one-pass GPU kernel, 'xp' array-API calls, 'auto' = fused when possible.
    """

    ddof: int = 0
    method: Literal["auto", "fused", "xp"] = "auto"

    def __post_init__(self):
        if self.ddof < 0:
            raise ConfigError(f"params.ddof: must be >= 0, got {self.ddof}")


class ReduceWorkload(Workload):
    name = "reduce"
    Params = ReduceParams
    DTYPES = ("float32", "float64")
    NDIMS = (1, 2)

    def setup(self, ctx, cfg, comm):
        self.ctx, self.cfg, self.comm, self.params = ctx, cfg, comm, cfg.params
        self.rows = InputRows(ctx, cfg, self.DTYPES, self.NDIMS)
        if self.params.ddof >= self.rows.global_rows:  # var = M2 / (n - ddof) would divide by max(0, 1) and pass
            raise ctx.collective_error(
                ConfigError,
                0,
                f"params.ddof: {self.params.ddof}, but the input has "
                f"{self.rows.global_rows} rows: var and std need more rows than ddof",
            )
        self._fused = ctx.agree(self._choose_method)
        self.results: list[np.ndarray] = []

    def _choose_method(self):
        method = self.params.method
        gpu_1d = self.ctx.device == "gpu" and len(self.rows.plan.row_shape) == 0
        if method == "fused" and not gpu_1d:
            raise ConfigError("params.method: fused needs device gpu and 1-D data; use auto or xp")
        if not (method in ("auto", "fused") and gpu_1d):
            return None
        fused = mom.FusedMoments()
        if self.rows.plan.dtype in mom.DEFAULT_LOADS:  # the dtypes the kernel takes
            fused.shape(self.rows.plan.dtype)  # compiled now, not inside the first repeat's compute phase
        return fused

    def prepare(self):
        self.rows.poison()  # rows the read misses show up as NaN

    def run(self, timer):
        data = self.rows.read(timer)
        with timer.phase("compute"):
            fused = self._fused is not None and self._fused.supports(data)  # else the array path (other dtypes)
            local = self._fused(data) if fused else mom.moments_xp(data, self.ctx.xp)
            faults.corrupt(local, "moments")
        with timer.phase("comm"):
            stacked = self.comm.allgather(local)
            merged = mom.combine_all(xpmod.to_host(stacked))
        self.results.append(merged)
        self.local = local

    def verify(self):
        for i, m in enumerate(self.results[1:], start=1):
            if not np.array_equal(m, self.results[0], equal_nan=True):
                raise self.ctx.collective_error(
                    VerificationError,
                    self.ctx.rank,
                    f"repeat {i} gave different moments than repeat 0 (a race or unwritten memory)",
                )
        # Each rank's own moments first: a wrong partial min or max that another rank's hides from the
        # merged answer (silent corruption on one rank) shows only here.
        own = self.ctx.agree(self._check_own_moments)
        expected, how = self.ctx.agree(self._reference, root_only=True)
        worst = self.ctx.agree(compare, self.results[-1], expected, root_only=True)
        return {
            "reference": how,
            "each_rank": "its moments against plain float64 NumPy over its rows",
            "max_relative_error": max(worst, own),
        }

    def _check_own_moments(self) -> float:
        """This rank's last moments against plain float64 NumPy over the rows it read (still in host memory)."""
        try:
            return compare(xpmod.to_host(self.local), reference_stats(self.rows.host_rows()))
        except VerificationError as exc:
            raise VerificationError(f"this rank's own moments ({self.rows.plan.describe()}): {exc}") from None

    def check_input_finite(self):
        self.rows.check_input_finite()

    def _reference(self):
        mode = self.cfg.verify
        sources = self.rows.sources
        if mode in ("auto", "attrs"):
            found = [read_stat_attrs(path, name) for path, name in sources]
            if all(s is not None for s in found):
                return merge_stats(found), "attrs"
            if mode == "attrs":
                missing = [p for (p, _), s in zip(sources, found) if s is None]
                raise InputError(
                    f"verify: attrs, but {missing[0]} has no expected-answer attributes "
                    f"(make it with spmd generate, or use verify: full)"
                )
        stats = []
        for path, name in sources:
            with open_h5(path) as f:
                stats.append(reference_stats(f[name]))
        return merge_stats(stats), "full"

    def result(self):
        return finalize(self.results[-1], self.params.ddof, scalar=len(self.rows.plan.row_shape) == 0)

    def metrics(self, rank_medians):
        compute = [m.get("compute", 0.0) for m in rank_medians]
        rank_bytes = self.rows.rank_bytes
        rates = [b / t / 1e9 if t > 0 else None for b, t in zip(rank_bytes, compute)]
        return {"bytes_total": int(sum(rank_bytes)), "bytes_per_rank": rank_bytes, "compute_GBps_per_rank": rates}

    def problem(self):
        columns = int(np.prod(self.rows.plan.row_shape, dtype=np.int64))
        moments_bytes = len(mom.FIELDS) * columns * 8  # float64 moments of every column
        return {"bytes": int(sum(self.rows.rank_bytes)), "comm": [{"op": "allgather", "bytes": moments_bytes}]}

    @classmethod
    def expected_attrs(cls, dataset):
        return reference_stats(dataset)

    def close(self):
        if getattr(self, "rows", None) is not None:  # set up, or failed before its rows were
            self.rows.close()


def finalize(m: np.ndarray, ddof: int, scalar: bool) -> dict:
    """report.json's ``result``: sum, mean, min, max, var, std (scalars for 1-D data)."""
    n = m[mom.COUNT]
    var = m[mom.M2] / np.maximum(n - ddof, 1)
    stats = {
        "sum": m[mom.MEAN] * n,
        "mean": m[mom.MEAN],
        "min": m[mom.MIN],
        "max": m[mom.MAX],
        "var": var,
        "std": np.sqrt(var),
    }
    return {k: float(v[0]) if scalar else [float(x) for x in v] for k, v in stats.items()}


def reference_stats(dataset) -> dict:
    """Float64 reference statistics of an h5py dataset, by plain two-pass NumPy in chunks.

    Independent of the moments-merging code it checks: pass 1 sums, pass 2 squared deviations.
    """
    rows = dataset.shape[0]
    columns = int(np.prod(dataset.shape[1:], dtype=np.int64))
    step = max(1, READ_CHUNK_ELEMENTS // max(columns, 1))
    total = np.zeros(columns)
    abs_total = np.zeros(columns)
    lo = np.full(columns, np.inf)
    hi = np.full(columns, -np.inf)
    for start in range(0, rows, step):
        part = dataset[start : start + step].reshape(-1, columns).astype(np.float64)
        total += part.sum(axis=0)
        abs_total += np.abs(part).sum(axis=0)
        lo = np.minimum(lo, part.min(axis=0))
        hi = np.maximum(hi, part.max(axis=0))
    mean = total / rows
    m2 = np.zeros(columns)
    for start in range(0, rows, step):
        part = dataset[start : start + step].reshape(-1, columns).astype(np.float64)
        m2 += ((part - mean) ** 2).sum(axis=0)
    return {"count": np.full(columns, float(rows)), "sum": total, "abs_sum": abs_total, "min": lo, "max": hi, "m2": m2}


def read_stat_attrs(path: str, name: str) -> dict | None:
    """The reference statistics stored on a dataset by ``spmd generate``, or None."""
    with open_h5(path) as f:
        attrs = f[name].attrs
        if not all(k in attrs for k in STAT_ATTRS):
            return None
        return {k: np.atleast_1d(np.asarray(attrs[k], dtype=np.float64)) for k in STAT_ATTRS}


def merge_stats(parts: list[dict]) -> dict:
    """Statistics of the union of disjoint datasets (shards): sums added, the rest merged
    by ``moments.combine`` (NumPy tests check it independently)."""
    merged = mom.combine_all(
        [np.stack([p["count"], p["sum"] / p["count"], p["m2"], p["min"], p["max"]]) for p in parts]
    )
    return {
        "count": merged[mom.COUNT],
        "sum": sum(p["sum"] for p in parts),
        "abs_sum": sum(p["abs_sum"] for p in parts),
        "min": merged[mom.MIN],
        "max": merged[mom.MAX],
        "m2": merged[mom.M2],
    }


def compare(moments: np.ndarray, expected: dict) -> float:
    """Check merged moments against reference statistics; return the largest relative error.

    Tolerances follow the conditioning: sum and mean against sum(|x|), M2 against itself
    plus the second raw moment. Count, min and max must match exactly; NaN never passes.
    """
    n = moments[mom.COUNT]
    got = {
        "count": n,
        "sum": moments[mom.MEAN] * n,
        "min": moments[mom.MIN],
        "max": moments[mom.MAX],
        "m2": moments[mom.M2],
    }
    raw2 = expected["m2"] + expected["sum"] ** 2 / expected["count"]  # sum of x^2
    scale = {
        "count": None,
        "min": None,
        "max": None,
        "sum": SUM_RTOL * expected["abs_sum"],
        "m2": M2_RTOL * expected["m2"] + SUM_RTOL * raw2,
    }
    worst = 0.0
    for key, tol in scale.items():
        g, e = got[key], expected[key]
        err = np.abs(g - e)
        bad = ~np.isfinite(g) | (err > tol if tol is not None else g != e)
        if bad.any():
            c = int(np.argmax(bad))
            column = f" (column {c})" if g.size > 1 else ""
            bound = "exact" if tol is None else f"tolerance {tol[c]:.3g}"
            raise VerificationError(f"{key}{column} = {float(g[c])!r}, expected {float(e[c])!r} ({bound})")
        denominator = np.maximum(np.abs(e), np.finfo(np.float64).tiny)
        worst = max(worst, float(np.max(err / denominator)))
    return worst

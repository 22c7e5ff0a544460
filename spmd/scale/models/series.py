"""Scaling figures of one series (strong or weak) from the reports of its runs.

Time of a run: the median over repeats of the slowest rank's total, since a repeat ends
when its last rank does, with its confidence interval (spmd.core.stats); a speedup's or efficiency's interval comes
from the ends of its two runs' intervals (conservative). With p = n / n0 (n0: the smallest size of the series):
strong speedup = T(n0) / T(n), efficiency = speedup / p; weak efficiency = T(n0) / T(n),
scaled speedup = efficiency x p (Gustafson). Karp-Flatt serial fraction
e = (1/speedup - 1/p) / (1 - 1/p), defined for p > 1.
"""

from __future__ import annotations

import statistics

from ...core.stats import Interval, median_interval, ratio_interval
from ...report.summary import job_time, slowest_per_repeat

# Phases that ran hidden behind others (communication behind compute, copies to the GPU behind the read): they
# are not part of a repeat's time, so they are neither summed, fitted nor named as what slowed a repeat.
OVERLAPPED = ("comm_overlapped", "h2d_overlapped")
# Phases that are not a rank's own additive work.
NOT_LOCAL = ("wait", "comm", *OVERLAPPED, "total")


def local_phases(report: dict) -> list[str]:
    """Phases that are the rank's own work (read, h2d, compute, ...)."""
    return [p for p in report["timings"] if p not in NOT_LOCAL]


def imbalance(report: dict) -> float:
    """Max over mean of the ranks' own work (sum of their local phases' medians); 1 = balanced."""
    phases = local_phases(report)
    busy = [sum(r["median"].get(p, 0.0) for p in phases) for r in report["per_rank"]]
    mean = statistics.fmean(busy)
    return max(busy) / mean if mean > 0 else 1.0


def karp_flatt(speedup: float, p: float) -> float | None:
    """Experimentally determined serial fraction; None at p = 1 (undefined)."""
    if p <= 1 or speedup <= 0:
        return None
    return (1 / speedup - 1 / p) / (1 - 1 / p)


def time_interval(report: dict) -> Interval:
    """The median over repeats of the slowest rank's total, with its confidence interval (spmd.core.stats)."""
    return median_interval(slowest_per_repeat([r["repeats"] for r in report["per_rank"]])["total"])


def series_figures(mode: str, reports: list[dict]) -> list[dict]:
    """Figures of each run of one series, smallest rank count first.

    Args:
        mode: 'strong' (fixed global problem) or 'weak' (fixed problem per rank).
        reports: report.json contents of each run, in increasing rank count.
    """
    base = reports[0]
    n0, t0 = base["ranks"], job_time(base)
    base_iv = time_interval(base)
    rows = []
    for report in reports:
        n, t = report["ranks"], job_time(report)
        iv = time_interval(report)
        p = n / n0
        # the ratio's interval from the ends of both runs' intervals; the base against itself is exactly 1
        low, high = (1.0, 1.0) if report is base else ratio_interval(base_iv, iv)
        if mode == "strong":
            speedup = t0 / t
            efficiency = speedup / p
            speedups, efficiencies = (low, high), (low / p, high / p)
        else:
            efficiency = t0 / t
            speedup = efficiency * p
            speedups, efficiencies = (low * p, high * p), (low, high)
        timings = report["timings"]
        total = timings["total"]["median"]
        problem_bytes = report.get("problem", {}).get("bytes")
        rows.append(
            {
                "mode": mode,
                "ranks": n,
                "time": t,
                "time_interval": [iv.low, iv.high],
                "interval_level": iv.level,
                "speedup": speedup,
                "speedup_interval": list(speedups),
                "efficiency": efficiency,
                "efficiency_interval": list(efficiencies),
                "karp_flatt": karp_flatt(speedup, p),
                "comm_share": timings["comm"]["median"] / total if total > 0 else 0.0,
                "imbalance": imbalance(report),
                "problem_bytes": problem_bytes,
                "bytes_per_rank": problem_bytes / n if problem_bytes else None,
                "timings": timings,
            }
        )
    return rows

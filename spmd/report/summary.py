"""Per-rank phase timings -> min / median / max across ranks, plus imbalance; a report's time per repeat."""

from __future__ import annotations

import statistics

from ..core.stats import median_interval
from ..core.timing import is_host_side

# read: file -> host; wait: waiting for the slowest rank's read (input imbalance);
# h2d: host -> device; compute: local work; comm: the communicator; total: the whole repeat.
PHASES = ("read", "wait", "h2d", "compute", "comm", "total")


def phase_names(records_by_rank: list[list[dict[str, float]]]) -> list[str]:
    """The standard phases, then any other phase recorded on any rank (sorted); a phase's host side is not one."""
    seen = {name for records in records_by_rank for r in records for name in r if not is_host_side(name)}
    return list(PHASES) + sorted(seen - set(PHASES))


def rank_medians(records: list[dict[str, float]], names: list[str]) -> dict[str, float]:
    """Median over one rank's recorded repeats of each phase in ``names`` (absent = 0)."""
    return {name: statistics.median(r.get(name, 0.0) for r in records) for name in names}


def summarize(records_by_rank: list[list[dict[str, float]]]) -> tuple[dict, list[dict[str, float]]]:
    """Across-rank statistics of each rank's median phase time.

    Args:
        records_by_rank: for each rank, its list of {phase: seconds} per recorded repeat.

    Returns:
        ({phase: {min, median, max, imbalance}}, each rank's medians). Imbalance is
        max / median across ranks: 1.0 is perfectly balanced.
    """
    names = phase_names(records_by_rank)
    medians = [rank_medians(r, names) for r in records_by_rank]
    timings = {}
    for phase in names:
        values = [m[phase] for m in medians]
        mid = statistics.median(values)
        timings[phase] = {
            "min": min(values),
            "median": mid,
            "max": max(values),
            "imbalance": max(values) / mid if mid > 0 else 1.0,
        }
    return timings, medians


def slowest_per_repeat(records_by_rank: list[list[dict[str, float]]]) -> dict[str, list[float]]:
    """{phase: for each recorded repeat, the slowest rank's seconds} (a repeat ends when its last rank does)."""
    n = min(len(records) for records in records_by_rank)
    phases = sorted({p for records in records_by_rank for r in records for p in r if not is_host_side(p)})
    return {p: [max(records[i].get(p, 0.0) for records in records_by_rank) for i in range(n)] for p in phases}


def intervals(records_by_rank: list[list[dict[str, float]]]) -> dict[str, dict]:
    """report.json's ``intervals``: per phase, the median over repeats of the slowest rank's seconds and its
    confidence interval (spmd.core.stats)."""
    return {
        phase: median_interval(values).to_dict()
        for phase, values in slowest_per_repeat(records_by_rank).items()
        if values
    }


def job_time(report: dict) -> float:
    """Median over recorded repeats of the slowest rank's total (seconds): a repeat ends when its
    last rank does."""
    per_rank = [r["repeats"] for r in report["per_rank"]]
    return statistics.median(max(repeats[i]["total"] for repeats in per_rank) for i in range(len(per_rank[0])))

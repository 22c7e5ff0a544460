"""Per-rank phase timings -> min / median / max across ranks, plus imbalance."""

from __future__ import annotations

import statistics

PHASES = ("read", "h2d", "compute", "comm", "total")


def rank_medians(records: list[dict[str, float]]) -> dict[str, float]:
    """Median over one rank's recorded repeats, for every phase (standard phases always present)."""
    names = list(PHASES) + sorted({k for r in records for k in r} - set(PHASES))
    return {name: statistics.median(r.get(name, 0.0) for r in records) for name in names}


def summarize(records_by_rank: list[list[dict[str, float]]]) -> tuple[dict, list[dict[str, float]]]:
    """Across-rank statistics of each rank's median phase time.

    Args:
        records_by_rank: for each rank, its list of {phase: seconds} per recorded repeat.

    Returns:
        ({phase: {min, median, max, imbalance}}, each rank's medians). Imbalance is
        max / median across ranks: 1.0 is perfectly balanced.
    """
    medians = [rank_medians(r) for r in records_by_rank]
    timings = {}
    for phase in medians[0]:
        values = [m[phase] for m in medians]
        mid = statistics.median(values)
        timings[phase] = {"min": min(values), "median": mid, "max": max(values),
                          "imbalance": max(values) / mid if mid > 0 else 1.0}
    return timings, medians

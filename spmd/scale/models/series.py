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

from ...core.stats import BOUND, LEVEL, Interval, median_interval, ratio_interval
from ...report.summary import job_time, slowest_per_repeat

# Phases that ran hidden behind others (communication behind compute, copies to the GPU behind the read): they
# are not part of a repeat's time, so they are neither summed, fitted nor named as what slowed a repeat.
OVERLAPPED = ("comm_overlapped", "h2d_overlapped")
# Phases that are not a rank's own additive work.
NOT_LOCAL = ("wait", "comm", *OVERLAPPED, "total")
SUPERLINEAR = 1.05  # efficiency above this: suspect (a cache effect, or a base run slowed by something else)


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


def noise_reason(report: dict) -> str | None:
    """``noisy: ...`` when the interval of the time per repeat is wider than +-BOUND of its median (under
    ``repeats: auto``: still, after its budget, or below the 95% level); None otherwise."""
    iv = time_interval(report)
    rule = report.get("repeat_rule") or {}
    auto = rule.get("rule") == "auto"
    if iv.n < 2 or iv.tight(BOUND, need_level=auto):
        return None
    after = f" after its {rule['max_seconds']:g} s budget" if auto and rule.get("stopped") == "budget" else ""
    # no level here: a sweep's findings state the levels once (advice.interval_note), each line alike; unless
    # the level itself is why (repeats: auto stopped by its budget before its repeats reached 95%)
    width = iv.relative_halfwidth()
    if width <= BOUND:
        return (
            f"noisy: {iv.n} repeats{after}, too few for a {LEVEL:.0%} interval of the time per repeat (within "
            f"+-{width:.0%} of its median at the level they reach; bound +-{BOUND:.0%})"
        )
    return (
        f"noisy: the interval of the time per repeat reaches +-{width:.0%} of its median over {iv.n} repeats{after} "
        f"(bound +-{BOUND:.0%})"
    )


def suspect_reasons(row: dict, placement: dict, report: dict) -> list[str]:
    """Short reasons a careful reader would doubt this run's figures; empty when none."""
    reasons = [
        f"oversubscribed: {host} ran {placement['ranks_per_node'][host]} ranks on "
        f"{placement['cpus_per_node'][host]} CPUs"
        for host in placement["oversubscribed"]
    ]
    reasons += list((report.get("host") or {}).get("busy") or [])  # spmd.core.host: threads beyond cores, others' load
    single = placement.get("single_cpu_gpu_ranks") or []
    if single:  # its launch-bound steps measure the CPU's contention as well (topology.single_cpu_gpu_ranks)
        reasons.append(f"one CPU per GPU rank: {len(single)} rank(s) bound to a single CPU by the launcher")
    if row["efficiency"] > SUPERLINEAR:
        reasons.append(f"superlinear: efficiency {row['efficiency']:.0%} (above {SUPERLINEAR:.0%})")
    if row["karp_flatt"] is not None and row["karp_flatt"] < 0:
        reasons.append(f"negative Karp-Flatt serial fraction ({row['karp_flatt']:.3f})")
    noise = noise_reason(report)
    if noise:
        reasons.append(noise)
    return reasons


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

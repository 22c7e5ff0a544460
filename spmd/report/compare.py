"""``spmd report compare OLD NEW``: per size and phase, how much slower or faster NEW is.

Works on report.json (one size, counted as a strong-scaling point) and scaling.json. What is compared, per
phase: where a report keeps its repeats (every report of this spmd does), each repeat's time is its slowest
rank's (a repeat ends when its last rank does), and a point is the median of those over the repeats, shown with
its confidence interval (spmd.core.stats: 95% from 6 repeats; with fewer, [fastest, slowest] at the level they give),
so the value always lies inside it. A phase is called slower only when the change is above ``--fail-above`` and
the intervals do not overlap: NEW's interval starts above OLD's end. Where a report holds no repeats, the point is
the median over ranks of each rank's median (its timings table), phases under ``--min-seconds`` in both are the
noise floor, and no interval is shown.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InputError, brief, one_line
from ..core.stats import median_interval
from ..core.units import fmt_seconds
from .schema import check_report, check_scaling, read_json
from .summary import slowest_per_repeat

HEADER = (
    "old, new: per repeat the slowest rank's time, median over the repeats [its confidence interval: 95%, "
    "or [fastest - slowest] below 6 repeats]; a report without repeats: the median over ranks of each rank's "
    "median (no interval)"
)


@dataclass(frozen=True)
class Point:
    """One phase of one size: the value compared, and its confidence interval (None without repeats)."""

    value: float
    span: tuple[float, float] | None = None


Entries = dict[tuple[str, int], dict[str, Point]]


def load_entries(path: str | Path) -> Entries:
    """``entries`` of the report or scaling.json at ``path``, checked."""
    return entries(_load(path))


def compare_files(
    old: str | Path, new: str | Path, fail_above: float | None, min_seconds: float
) -> tuple[list[dict], list[dict]]:
    """``compare`` of two reports of one workload (InputError for reports of different ones)."""
    a, b = _load(old), _load(new)
    if a["workload"] != b["workload"]:
        raise InputError(
            f"{one_line(old)} is a report of {a['workload']}, {one_line(new)} of {b['workload']}: nothing to compare"
        )  # names checked short and one line (schema)
    return compare(entries(a), entries(b), fail_above, min_seconds)


def _load(path) -> dict:
    """A report.json or a scaling.json, checked (spmd.report.schema)."""
    data = read_json(path, "a JSON report")
    if isinstance(data, dict) and data.get("kind") == "scaling":
        return check_scaling(data, path)
    if not isinstance(data, dict) or "timings" not in data:
        raise InputError(f"{one_line(path)}: neither a report.json nor a scaling.json (no timings)")
    return check_report(data, path)


def entries(data: dict) -> Entries:
    """{(series, ranks): {phase: Point, 'time': the repeat's}} of a checked report.json or scaling.json."""
    if data.get("kind") == "scaling":
        runs = {(r["mode"], r["ranks"]): r.get("report") for r in data.get("runs", []) if isinstance(r, dict)}
        rows = {(mode, row["ranks"]): row for mode, rows in data["series"].items() for row in rows}
        return {key: _points(row["timings"], row["time"], runs.get(key)) for key, row in rows.items()}
    per_rank = [r["repeats"] for r in data["per_rank"]]
    time = statistics.median(max(reps[i]["total"] for reps in per_rank) for i in range(len(per_rank[0])))
    return {("strong", data["ranks"]): _points(data["timings"], time, data)}


def _points(timings: dict, time: float, report: dict | None) -> dict[str, Point]:
    """Each phase's Point: from the report's repeats when it kept them (checked as a report.json), else the
    timings table's medians."""
    slowest = _slowest_per_repeat(report)
    if slowest is None:
        points = {phase: Point(stats["median"]) for phase, stats in timings.items()}
        points["time"] = Point(time)
        return points
    points = {}
    for phase, values in slowest.items():
        iv = median_interval(values)
        points[phase] = Point(iv.median, (iv.low, iv.high))
    points["time"] = points["total"]
    return points


def _slowest_per_repeat(report: dict | None) -> dict[str, list[float]] | None:
    """{phase: per repeat, the slowest rank's seconds} of a report that kept every rank's repeats, else None."""
    if not isinstance(report, dict):
        return None
    try:
        per_rank = check_report(report, "a run of the scaling.json")["per_rank"]
    except InputError:
        return None
    return slowest_per_repeat([r["repeats"] for r in per_rank])


def compare(old: Entries, new: Entries, fail_above: float | None, min_seconds: float) -> tuple[list[dict], list[dict]]:
    """Rows of (series, ranks, phase, old, new, change) for every point in both; and the rows slower by more than
    ``fail_above`` percent and beyond the noise: where both points have intervals, NEW's must start above OLD's
    end (overlapping intervals are noise, ``row['noise']``); where they do not, phases under ``min_seconds`` in both
    never fail."""
    common = sorted(set(old) & set(new), key=lambda k: (k[0], k[1]))
    if not common:
        raise InputError("the two reports have no series and rank count in common")
    rows, slower = [], []
    for key in common:
        for phase, b in new[key].items():
            a = old[key].get(phase)
            if a is None:
                continue
            change = (b.value - a.value) / a.value * 100 if a.value > 0 else (0.0 if b.value == 0 else float("inf"))
            row = {
                "series": key[0],
                "ranks": key[1],
                "phase": phase,
                "old": a.value,
                "new": b.value,
                "change_pct": change,
            }
            if a.span and b.span:
                row["old_range"], row["new_range"] = a.span, b.span
                row["noise"] = b.span[0] <= a.span[1]  # the intervals overlap: the data cannot tell them apart
            else:
                row["noise"] = max(a.value, b.value) < min_seconds
            rows.append(row)
            if fail_above is not None and change > fail_above and not row["noise"]:
                slower.append(row)
    return rows, slower


def format_compare(rows: list[dict], slower: list[dict], fail_above: float | None) -> str:
    flagged = {id(r) for r in slower}
    lines = [
        HEADER,
        f"{'series':<8}{'ranks':>6}  {'phase':<15}{'old':>12}{'new':>12}{'change':>10}  "
        f"old [interval] / new [interval]",
    ]
    hidden = 0
    for r in rows:
        mark = "  SLOWER" if id(r) in flagged else ""
        if not mark and fail_above is not None and r["change_pct"] > fail_above and r["noise"]:
            mark, hidden = "  (intervals overlap)", hidden + 1
        spread = f"  [{_range(r['old_range'])}] / [{_range(r['new_range'])}]" if "old_range" in r else ""
        lines.append(
            f"{r['series']:<8}{r['ranks']:>6}  {brief(one_line(r['phase']))[1:-1]:<15}"
            f"{fmt_seconds(r['old']):>12}{fmt_seconds(r['new']):>12}{r['change_pct']:>+9.1f}%{spread}{mark}"
        )
    if fail_above is not None:
        noise = f" ({hidden} more whose intervals overlap: noise, not flagged)" if hidden else ""
        lines.append(
            (f"{len(slower)} slowdown(s) above {fail_above:g}%" if slower else f"no slowdown above {fail_above:g}%")
            + noise
        )
    return "\n".join(lines)


def _range(span: tuple[float, float]) -> str:
    return f"{fmt_seconds(span[0]).strip()} - {fmt_seconds(span[1]).strip()}"

"""``spmd report compare OLD NEW``: per size and phase, how much slower or faster NEW is.

Works on report.json (one size, counted as a strong-scaling point) and scaling.json. A phase is called slower
only when the change is above ``--fail-above`` and beyond both runs' own spread: NEW's fastest repeat slower
than OLD's slowest (per repeat, the slowest rank's time; the reports keep every repeat). Where a report holds no
repeats, phases under ``--min-seconds`` in both are the noise floor instead.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..units import fmt_seconds
from .schema import check_report, check_scaling, read_json
from .summary import job_time

Entries = dict[tuple[str, int], dict[str, float]]
Spreads = dict[tuple[str, int], dict[str, tuple[float, float]]]


def load_entries(path: str | Path) -> Entries:
    """{(series, ranks): {phase: median seconds, 'time': seconds per repeat}} of a report."""
    return _entries(_load(path))


def compare_files(old: str | Path, new: str | Path, fail_above: float | None,
                  min_seconds: float) -> tuple[list[dict], list[dict]]:
    """``compare`` of two reports of one workload (InputError for reports of different ones)."""
    a, b = _load(old), _load(new)
    if a["workload"] != b["workload"]:
        raise InputError(f"{old} is a report of {a['workload']}, {new} of {b['workload']}: nothing to compare")
    return compare(_entries(a), _entries(b), fail_above, min_seconds, _spreads(a), _spreads(b))


def _load(path) -> dict:
    """A report.json or a scaling.json, checked (spmd.report.schema)."""
    data = read_json(path, "a JSON report")
    if isinstance(data, dict) and data.get("kind") == "scaling":
        return check_scaling(data, path)
    if not isinstance(data, dict) or "timings" not in data:
        raise InputError(f"{path}: neither a report.json nor a scaling.json (no timings)")
    return check_report(data, path)


def _entries(data: dict) -> Entries:
    if data.get("kind") == "scaling":
        return {(mode, row["ranks"]): {**{p: t["median"] for p, t in row["timings"].items()}, "time": row["time"]}
                for mode, rows in data["series"].items() for row in rows}
    return {("strong", data["ranks"]): {**{p: t["median"] for p, t in data["timings"].items()},
                                        "time": job_time(data)}}


def _spreads(data: dict) -> Spreads:
    """{(series, ranks): {phase: (fastest, slowest) repeat}}, a repeat's time being its slowest rank's ('time':
    the repeat's total); empty for a point whose report kept no repeats."""
    reports = ({(r["mode"], r["ranks"]): r["report"] for r in data.get("runs", [])} if data.get("kind") == "scaling"
               else {("strong", data["ranks"]): data})
    out: Spreads = {}
    for key, report in reports.items():
        per_rank = [r.get("repeats") or [] for r in report.get("per_rank", [])]
        if not per_rank or not all(per_rank) or len({len(r) for r in per_rank}) > 1:
            continue
        phases = {p for r in per_rank for rep in r for p in rep}
        ranges = {}
        for phase in phases:
            values = [max(r[i].get(phase, 0.0) for r in per_rank) for i in range(len(per_rank[0]))]
            ranges[phase] = (min(values), max(values))
        if "total" in ranges:
            ranges["time"] = ranges["total"]
        out[key] = ranges
    return out


def compare(old: Entries, new: Entries, fail_above: float | None, min_seconds: float,
            old_spread: Spreads | None = None, new_spread: Spreads | None = None) -> tuple[list[dict], list[dict]]:
    """Rows of (series, ranks, phase, old, new, change) for every point in both; and the rows slower by more than
    ``fail_above`` percent and beyond the noise: where both reports kept their repeats, NEW's fastest repeat must be
    slower than OLD's slowest (a difference inside the runs' own spread is noise, ``row['noise']``); where they did
    not, phases under ``min_seconds`` in both never fail."""
    common = sorted(set(old) & set(new), key=lambda k: (k[0], k[1]))
    if not common:
        raise InputError("the two reports have no series and rank count in common")
    rows, slower = [], []
    for key in common:
        for phase in new[key]:
            if phase not in old[key]:
                continue
            a, b = old[key][phase], new[key][phase]
            change = (b - a) / a * 100 if a > 0 else (0.0 if b == 0 else float("inf"))
            row = {"series": key[0], "ranks": key[1], "phase": phase, "old": a, "new": b, "change_pct": change}
            spread_a = (old_spread or {}).get(key, {}).get(phase)
            spread_b = (new_spread or {}).get(key, {}).get(phase)
            if spread_a and spread_b:
                row["old_range"], row["new_range"] = spread_a, spread_b
                row["noise"] = spread_b[0] <= spread_a[1]  # the ranges overlap: the runs' own spread covers it
            else:
                row["noise"] = max(a, b) < min_seconds
            rows.append(row)
            if fail_above is not None and change > fail_above and not row["noise"]:
                slower.append(row)
    return rows, slower


def format_compare(rows: list[dict], slower: list[dict], fail_above: float | None) -> str:
    flagged = {id(r) for r in slower}
    lines = [f"{'series':<8}{'ranks':>6}  {'phase':<15}{'old':>12}{'new':>12}{'change':>10}  old / new repeats"]
    hidden = 0
    for r in rows:
        mark = "  SLOWER" if id(r) in flagged else ""
        if not mark and fail_above is not None and r["change_pct"] > fail_above and r["noise"]:
            mark, hidden = "  (within the runs' spread)", hidden + 1
        spread = (f"  {_range(r['old_range'])} / {_range(r['new_range'])}" if "old_range" in r else "")
        lines.append(f"{r['series']:<8}{r['ranks']:>6}  {r['phase']:<15}{fmt_seconds(r['old']):>12}"
                     f"{fmt_seconds(r['new']):>12}{r['change_pct']:>+9.1f}%{spread}{mark}")
    if fail_above is not None:
        noise = f" ({hidden} more inside the runs' own spread: noise, not flagged)" if hidden else ""
        lines.append((f"{len(slower)} slowdown(s) above {fail_above:g}%" if slower
                      else f"no slowdown above {fail_above:g}%") + noise)
    return "\n".join(lines)


def _range(span: tuple[float, float]) -> str:
    return f"{fmt_seconds(span[0]).strip()}-{fmt_seconds(span[1]).strip()}"

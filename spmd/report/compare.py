"""``spmd report compare OLD NEW``: per size and phase, how much slower or faster NEW is.

Works on report.json (one size, counted as a strong-scaling point) and scaling.json.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..units import fmt_seconds
from .schema import check_report, check_scaling, read_json
from .summary import job_time

Entries = dict[tuple[str, int], dict[str, float]]


def load_entries(path: str | Path) -> Entries:
    """{(series, ranks): {phase: median seconds, 'time': seconds per repeat}} of a report."""
    return _entries(_load(path))


def compare_files(old: str | Path, new: str | Path, fail_above: float | None,
                  min_seconds: float) -> tuple[list[dict], list[dict]]:
    """``compare`` of two reports of one workload (InputError for reports of different ones)."""
    a, b = _load(old), _load(new)
    if a["workload"] != b["workload"]:
        raise InputError(f"{old} is a report of {a['workload']}, {new} of {b['workload']}: nothing to compare")
    return compare(_entries(a), _entries(b), fail_above, min_seconds)


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


def compare(old: Entries, new: Entries, fail_above: float | None, min_seconds: float) -> tuple[list[dict], list[dict]]:
    """Rows of (series, ranks, phase, old, new, change) for every point in both; and the
    rows slower by more than ``fail_above`` percent (phases under ``min_seconds`` in both
    reports are shown but never fail: they are noise)."""
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
            rows.append(row)
            if fail_above is not None and change > fail_above and max(a, b) >= min_seconds:
                slower.append(row)
    return rows, slower


def format_compare(rows: list[dict], slower: list[dict], fail_above: float | None) -> str:
    flagged = {id(r) for r in slower}
    lines = [f"{'series':<8}{'ranks':>6}  {'phase':<10}{'old':>12}{'new':>12}{'change':>10}"]
    for r in rows:
        mark = "  SLOWER" if id(r) in flagged else ""
        lines.append(f"{r['series']:<8}{r['ranks']:>6}  {r['phase']:<10}{fmt_seconds(r['old']):>12}"
                     f"{fmt_seconds(r['new']):>12}{r['change_pct']:>+9.1f}%{mark}")
    if fail_above is not None:
        lines.append(f"{len(slower)} slowdown(s) above {fail_above:g}%" if slower
                     else f"no slowdown above {fail_above:g}%")
    return "\n".join(lines)

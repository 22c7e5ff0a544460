"""What readers of report.json and scaling.json rely on, checked before they use it: a file that parses
but lacks a field, has one of another type, or comes from another schema is an InputError naming the
file and the field, not a traceback from deep inside an analysis."""

from __future__ import annotations

import json
from numbers import Real
from pathlib import Path

from ..errors import InputError, brief

REPORT_SCHEMA = 1
SCALING_SCHEMA = 1


def read_json(path: str | Path, what: str):
    """The parsed JSON at ``path`` (InputError when it cannot be read or parsed)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise InputError(f"{path}: cannot read {what}: {exc}") from None


def check_report(data, path) -> dict:
    """``data`` if it is a report.json of this schema with the fields merge and compare read."""
    where = f"{path}: not a report.json of spmd run"
    _need(isinstance(data, dict), where, "not a JSON object")
    _schema(data, REPORT_SCHEMA, path, "report")
    _need(isinstance(data.get("workload"), str), where, "workload")
    ranks = data.get("ranks")
    _need(isinstance(ranks, int) and not isinstance(ranks, bool) and ranks >= 1, where, "ranks")
    _timings(data.get("timings"), where)
    per_rank = data.get("per_rank")
    _need(isinstance(per_rank, list) and len(per_rank) == ranks, where, "per_rank (one entry per rank)")
    counts = set()
    for entry in per_rank:
        _need(isinstance(entry, dict) and isinstance(entry.get("median"), dict), where, "per_rank[].median")
        repeats = entry.get("repeats")
        _need(isinstance(repeats, list) and repeats, where, "per_rank[].repeats")
        _need(all(isinstance(r, dict) and _number(r.get("total")) for r in repeats), where, "per_rank[].repeats[].total")
        counts.add(len(repeats))
    _need(len(counts) == 1, where, "per_rank[].repeats (as many on every rank)")
    for key, kind in (("config", dict), ("result", dict), ("nodes", list), ("device", str), ("comm", str)):
        _need(isinstance(data.get(key), kind), where, key)
    _need(isinstance(data.get("verified"), bool), where, "verified")
    return data


def check_scaling(data, path) -> dict:
    """``data`` if it is a scaling.json of this schema with the fields compare and render read."""
    where = f"{path}: not a scaling.json of spmd scale"
    _need(isinstance(data, dict) and data.get("kind") == "scaling", where, "kind")
    _schema(data, SCALING_SCHEMA, path, "scaling")
    _need(isinstance(data.get("workload"), str), where, "workload")
    series = data.get("series")
    _need(isinstance(series, dict) and series, where, "series")
    for rows in series.values():
        _need(isinstance(rows, list) and rows, where, "series[]")
        for row in rows:
            _need(isinstance(row, dict) and isinstance(row.get("ranks"), int) and _number(row.get("time")),
                  where, "series[][].ranks/time")
            _timings(row.get("timings"), where)
    return data


def _schema(data: dict, expected: int, path, what: str) -> None:
    if data.get("schema") != expected:
        raise InputError(f"{path}: {what} schema {brief(data.get('schema'))}; this spmd reads schema {expected}")


def _timings(timings, where: str) -> None:
    _need(isinstance(timings, dict) and "total" in timings, where, "timings")
    for phase, stats in timings.items():
        _need(isinstance(stats, dict) and all(_number(stats.get(k)) for k in ("min", "median", "max")),
              where, f"timings.{brief(phase)}")


def _number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _need(ok: bool, where: str, field: str) -> None:
    if not ok:
        raise InputError(f"{where} (missing or malformed: {field})")

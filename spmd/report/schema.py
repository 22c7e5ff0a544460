"""What readers of report.json and scaling.json rely on, checked before they use it: a file that parses
but lacks a field, has one of another type, or comes from another schema is an InputError naming the
file and the field, not a traceback from deep inside an analysis."""

from __future__ import annotations

import json
import math
import os
import stat
from numbers import Real
from pathlib import Path

from ..core.errors import InputError, brief, one_line

# 2: report.json's ``host`` (compute threads, the load beside the ranks); scaling.json's ``decision`` and ``cost``.
# 3: a torch run's ``verification`` names its checked steps (``checked``, ``checked_steps``, ``escape_chance``, the
# checks' time); ``parameters_sha256`` and ``reference_seconds`` gone from it (scaling.json holds the runs' reports).
# Readers take the previous schemas too (their missing parts recomputed or left unsaid) and refuse any other.
REPORT_SCHEMA = 3
SCALING_SCHEMA = 3
READABLE = (1, 2, 3)
MAX_NAME = 1000  # a plug-in's path:NAME is long; a workload name of pages is no report's


MAX_JSON_BYTES = 1 << 30  # a scaling.json of a large sweep is tens of MB; a GB is no report


def read_json(path: str | Path, what: str):
    """The parsed JSON at ``path``: a regular file (a FIFO would block, /dev/zero never end) of at most
    MAX_JSON_BYTES, UTF-8, not nested beyond what Python can parse (InputError naming the file otherwise)."""
    name = one_line(path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{name}: cannot read {what}: not a regular file")
        if info.st_size > MAX_JSON_BYTES:
            raise InputError(f"{name}: cannot read {what}: {info.st_size} bytes, more than a report has")
        with open(path, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
        return json.loads(data.decode())
    except OSError as exc:
        raise InputError(f"{name}: cannot read {what}: {exc.strerror or exc}") from None
    except ValueError as exc:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
        raise InputError(f"{name}: cannot read {what}: {brief(one_line(exc))[1:-1]}") from None
    except RecursionError:
        raise InputError(f"{name}: cannot read {what}: nested too deeply") from None


def check_report(data, path) -> dict:
    """``data`` if it is a report.json of this schema with the fields merge and compare read."""
    where = f"{path}: not a report.json of spmd run"
    _need(isinstance(data, dict), where, "not a JSON object")
    _schema(data, REPORT_SCHEMA, path, "report")
    _need(_name(data.get("workload")), where, "workload")
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
        _need(
            all(
                isinstance(r, dict) and _number(r.get("total")) and all(_number(v) for v in r.values()) for r in repeats
            ),
            where,
            "per_rank[].repeats[] (finite seconds, total among them)",
        )
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
    _need(_name(data.get("workload")), where, "workload")
    series = data.get("series")
    _need(isinstance(series, dict) and series, where, "series")
    for rows in series.values():
        _need(isinstance(rows, list) and rows, where, "series[]")
        for row in rows:
            _need(
                isinstance(row, dict) and isinstance(row.get("ranks"), int) and _number(row.get("time")),
                where,
                "series[][].ranks/time",
            )
            _timings(row.get("timings"), where)
    return data


def _schema(data: dict, expected: int, path, what: str) -> None:
    if data.get("schema") not in READABLE or isinstance(data.get("schema"), bool):
        readable = ", ".join(map(str, READABLE))
        raise InputError(
            f"{one_line(path)}: {what} schema {brief(data.get('schema'))}; this spmd reads schema {readable} "
            f"(writes {expected})"
        )


def _timings(timings, where: str) -> None:
    _need(isinstance(timings, dict) and "total" in timings, where, "timings")
    for phase, stats in timings.items():
        _need(
            isinstance(stats, dict) and all(_number(stats.get(k)) for k in ("min", "median", "max")),
            where,
            f"timings.{brief(one_line(phase))} (finite min, median, max)",
        )


def _number(value) -> bool:
    """A finite number: NaN seconds would pass every comparison a regression gate makes."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def _name(value) -> bool:
    """A workload's name as spmd writes it: one line, not a page."""
    return isinstance(value, str) and 0 < len(value) <= MAX_NAME and value == one_line(value)


def _need(ok: bool, where: str, field: str) -> None:
    if not ok:
        raise InputError(f"{one_line(where)} (missing or malformed: {field})")

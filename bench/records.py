"""What a benchmark measures and how it is kept: one ``Measure`` per subject per run, one ``Record`` per subject
over the runs (JSON lines), and the statistics every suite and document uses, computed here alone."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from spmd.core.stats import median_interval

ROLES = ("result", "ceiling", "peer")  # spmd's figure; what bounds it (hardware, a library); another tool


@dataclass(frozen=True)
class Measure:
    """One value of one run: ``subject`` (what was timed) in ``case``, as ``metric`` in ``unit``; ``role`` says
    whether it is spmd's result, the ceiling it is held against, or a peer tool's figure."""

    case: str
    subject: str
    value: float
    metric: str
    unit: str
    role: str = "result"
    better: str = "higher"  # or "lower" (times)
    params: dict = field(default_factory=dict)


@dataclass
class Record:
    """A subject of a case over the runs: its values in run order (a run's values of every subject were
    measured together, so ratios pair them run by run)."""

    suite: str
    case: str
    subject: str
    metric: str
    unit: str
    role: str
    better: str
    values: list[float]
    params: dict = field(default_factory=dict)
    bench_case: str = ""  # the suite's case that measured it (bench run --only selects by it)

    def summary(self) -> dict:
        return summary(self.values)


def summary(values: list[float]) -> dict:
    """Median, range and the median's confidence interval (spmd.core.stats) of a run's values."""
    iv = median_interval(values)
    return {
        "median": iv.median,
        "min": min(values),
        "max": max(values),
        "low": iv.low,
        "high": iv.high,
        "level": iv.level,
        "n": iv.n,
    }


def ratios(result: Record, reference: Record) -> list[float]:
    """result / reference run by run (their runs measured together), or reference / result where lower is better:
    above 1 means spmd's figure is the better one."""
    pairs = list(zip(result.values, reference.values))
    if result.better == "lower":
        return [b / a for a, b in pairs if a > 0]
    return [a / b for a, b in pairs if b > 0]


def strongest(peers: list[Record]) -> Record | None:
    """The peer with the best median (the highest, or the lowest where lower is better): what spmd is held to."""
    if not peers:
        return None
    sign = -1 if peers[0].better == "lower" else 1
    return max(peers, key=lambda r: sign * summary(r.values)["median"])


def run_params(record: Record) -> list[dict]:
    """Each run's own params where the record keeps them: its ``runs``, or a single run's params themselves
    (none for a record of several runs that kept only the first's)."""
    if record.params.get("runs"):
        return record.params["runs"]
    return [record.params] if len(record.values) == 1 else []


def launch_times(record: Record) -> list[float]:
    """The measured time of each run (each its own launch) a record keeps (``measured_s``)."""
    return [p["measured_s"] for p in run_params(record) if p.get("measured_s")]


def median_run(runs: list[dict], values: list[float]) -> dict:
    """The params of a record whose runs keep their own (``runs``, in the order of ``values``): every run's, and at
    the top the median run's, the row a table shows beside the median value (the upper median, as the report
    takes it)."""
    median = sorted(range(len(values)), key=lambda i: values[i])[len(values) // 2]
    return {**runs[median], "runs": runs}


def collect(suite: str, runs: list[list[Measure]], bench_case: str = "") -> list[Record]:
    """Records of ``runs`` (each run's measures), one per (case, subject, metric), in the order first seen."""
    out: dict[tuple, Record] = {}
    for measures in runs:
        for m in measures:
            key = (m.case, m.subject, m.metric)
            if key not in out:
                out[key] = Record(
                    suite, m.case, m.subject, m.metric, m.unit, m.role, m.better, [], m.params, bench_case
                )
            out[key].values.append(m.value)
    return list(out.values())


def write_records(path: Path, records: list[Record]) -> None:
    """Append ``records`` to the JSON-lines file at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for r in records:
            f.write(json.dumps(asdict(r)) + "\n")


def rewrite_records(path: Path, records: list[Record]) -> None:
    """Replace the JSON-lines file at ``path`` with ``records`` whole (a reader never sees half of it)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(json.dumps(asdict(r)) + "\n" for r in records))
    os.replace(tmp, path)


def read_records(path: Path) -> list[Record]:
    return [Record(**json.loads(line)) for line in Path(path).read_text().splitlines() if line.strip()]

"""A prediction held against the runs measured on its target (``spmd predict --check``, the predict and held-out
suites): each predicted row beside the measured run of its ranks, problem and mode, its error, its speedup's against
the run's own sweep, and the phase furthest off."""

from __future__ import annotations

from ..models.scaling_model import measured
from ..models.series import time_interval


def measured_runs(path) -> list[dict]:
    """The runs measured on the target, as ``check_against`` takes them: a report.json's run, or every run of
    a scaling.json (a sweep run there)."""
    from ...report.schema import check_report, check_scaling, read_json

    data = read_json(path, "a report.json or scaling.json")
    if isinstance(data, dict) and data.get("kind") == "scaling":
        scaling = check_scaling(data, path)
        reports = [(r["mode"], r["report"]) for r in scaling["runs"]]
    else:
        reports = [(None, check_report(data, path))]  # one run: strong or weak by its problem's size
    return [
        {
            "path": str(path),
            "mode": mode,
            "ranks": report["ranks"],
            "nodes": len(report.get("nodes") or []) or 1,
            "problem_bytes": (report.get("problem") or {}).get("bytes"),
            "time": time_interval(report).median,
            "timings": report["timings"],
        }
        for mode, report in reports
    ]


def check_against(prediction: dict, runs: list[dict]) -> list[dict]:
    """Each predicted row beside the runs measured on the target of its ranks, problem and (a sweep's run) mode:
    the error, and the phase furthest off."""
    out = []
    for row in prediction["rows"]:
        for run in runs:
            same = (
                run["problem_bytes"] and abs(run["problem_bytes"] - row["problem_bytes"]) <= 0.01 * row["problem_bytes"]
            )
            if run["ranks"] != row["ranks"] or run["nodes"] != row["nodes"] or not same:
                continue
            if run["mode"] not in (None, row["mode"]):  # a sweep's run says which series it is
                continue
            entry = {
                "mode": row["mode"],
                "ranks": row["ranks"],
                "nodes": row["nodes"],
                "measured_nodes": run["nodes"],
                "measured_s": run["time"],
                "predicted_s": row["predicted_s"],
                "interval": row["interval"],
                "unseen_s": row.get("unseen_s", 0.0),
                "error": (row["predicted_s"] - run["time"]) / run["time"],
                # the interval's parts, for the held-out designs of its constants (bench.suites.heldout)
                **{k: row.get(k) for k in ("interval_parts", "unseen_below", "unseen_above") if k in row},
            }
            # speedup against each sweep's own one rank: within one launch, where whole launches differ in speed
            speedup = _measured_speedup(run, runs)
            if speedup and row.get("speedup"):
                entry.update(
                    measured_speedup=speedup,
                    speedup_error=row["speedup"] / speedup - 1,
                    speedup_interval=row.get("speedup_interval"),
                )
            timings = run["timings"]
            phases = {p: (measured({"timings": timings}, p), v) for p, v in row["phases"].items() if p in timings}
            if phases:
                entry["phases"] = {p: list(v) for p, v in phases.items()}
                worst = max(phases, key=lambda p: abs(phases[p][1] - phases[p][0]))
                entry.update(worst_phase=worst, worst_measured_s=phases[worst][0], worst_predicted_s=phases[worst][1])
            out.append(entry)
    return out


def _measured_speedup(run: dict, runs: list[dict]) -> float | None:
    """A sweep's run against the one-rank run of its own sweep and series: strong, the same problem's time;
    weak, bytes per second (None for a lone report, or where the sweep had no one-rank run)."""
    if run["mode"] is None or run["ranks"] < 2:
        return None
    one = next(
        (r for r in runs if r.get("path") == run.get("path") and r["mode"] == run["mode"] and r["ranks"] == 1), None
    )
    if one is None or not run["time"] or not one["problem_bytes"]:
        return None
    return one["time"] / run["time"] * run["problem_bytes"] / one["problem_bytes"]

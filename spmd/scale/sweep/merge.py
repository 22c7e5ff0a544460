"""``spmd report merge``: the report.json files of separate jobs (one per node count, as
``spmd jobscript`` writes them) combined into one scaling report, the same as ``spmd scale``'s.

Which series a report belongs to comes from the workload's own scaling rules: against the
report with the fewest ranks (the base), a report at n ranks is in the strong series when its
config is ``strong_config(base, n / n0)`` and in the weak series when it is
``weak_config(base, n / n0)`` (the base is in both).
"""

from __future__ import annotations

import json
from fractions import Fraction

from ...core.errors import InputError
from ...core.topology import summarize_placement
from ...report.schema import check_report, read_json
from ...workloads.base import SCALING_MODES
from ...workloads.registry import job_config_from_dict, workload_class
from .analysis import analyse

IGNORED = ("output",)  # where a job wrote is not what it ran


def load_report(path) -> dict:
    return check_report(read_json(path, "a report"), path)


def merge_reports(paths: list) -> dict:
    """The scaling dict (scaling.json, schema 1) of the reports at ``paths``."""
    if len(paths) < 2:
        raise InputError("spmd report merge needs at least two report.json files")
    reports = [(str(p), load_report(p)) for p in paths]
    workloads = {r["workload"] for _, r in reports}
    if len(workloads) > 1:
        raise InputError(f"the reports are of different workloads: {sorted(workloads)}")
    base_ranks = min(r["ranks"] for _, r in reports)
    bases = {_key(r["config"]) for _, r in reports if r["ranks"] == base_ranks}
    if len(bases) > 1:
        raise InputError(
            f"{len(bases)} different configs at the smallest size ({base_ranks} ranks): merge one series at a time"
        )
    base_path, base = next((p, r) for p, r in reports if r["ranks"] == base_ranks)
    cfg = job_config_from_dict(base["config"])
    cls = workload_class(cfg.workload)
    runs, seen = [], {}
    for path, report in reports:
        factor = Fraction(report["ranks"], base_ranks)
        mine = _key(report["config"])
        modes = [m for m in SCALING_MODES if _key(cls.scaled_config(cfg, m, factor).to_dict()) == mine]
        if not modes:
            raise InputError(
                f"{path}: its config ({report['ranks']} ranks) is neither the strong nor the weak "
                f"scaling of {base_path}'s ({base_ranks} ranks)"
            )
        for mode in modes:
            if (mode, report["ranks"]) in seen:
                raise InputError(
                    f"{path} and {seen[(mode, report['ranks'])]}: two {mode} runs at {report['ranks']} ranks"
                )
            seen[(mode, report["ranks"])] = path
            runs.append(
                {
                    "mode": mode,
                    "ranks": report["ranks"],
                    "placement": _placement(report),
                    "probe": None,
                    "backends": None,
                    "report": report,
                }
            )
    series_sizes = {m: sorted(n for mm, n in seen if mm == m) for m in SCALING_MODES}
    if not any(len(sizes) > 1 for sizes in series_sizes.values()):
        raise InputError("the reports make no series of two sizes or more (one size per mode)")
    runs.sort(key=lambda r: (SCALING_MODES.index(r["mode"]), r["ranks"]))
    runs = [r for r in runs if len(series_sizes[r["mode"]]) > 1]
    return analyse(cfg, runs, world_size=max(r["ranks"] for r in runs), mpi_library=base.get("mpi_library", "?"))


def _key(config: dict) -> str:
    return json.dumps({k: v for k, v in config.items() if k not in IGNORED}, sort_keys=True)


def _placement(report: dict) -> dict:
    """The report's placement, or one rebuilt from its nodes (reports written before it was kept)."""
    if report.get("placement"):
        return report["placement"]
    ranks = [
        {
            "rank": d["rank"],
            "host": node["host"],
            "local_rank": d["local_rank"],
            "device": report["device"],
            "device_id": d["device_id"],
            "name": d["name"],
            "cpus": None,
        }
        for node in report["nodes"]
        for d in node["devices"]
    ]
    return summarize_placement(ranks, [])

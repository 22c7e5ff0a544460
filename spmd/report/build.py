"""report.json: the timings gathered to rank 0, summarized, with what ran where, its result, the per-rank view
(breakdown, straggler, timeline of the last repeats) and the findings."""

from __future__ import annotations

import datetime

from ..core.host import device_sharing
from ..core.launch import launch_record, mpi_library
from ..core.version import __version__
from .breakdown import breakdown, findings
from .capture.causes import combine, retimed
from .schema import REPORT_SCHEMA
from .summary import intervals, summarize

TIMELINE_REPEATS = 3  # report.json keeps the last repeats' timeline (report.html draws it; --trace has them all)


def build_report(
    *,
    cfg,
    ctx,
    comm_name: str,
    records_by_rank,
    nodes,
    verification: dict,
    verified: bool,
    result: dict,
    metrics_fn,
    problem: dict | None = None,
    placement: dict | None = None,
    engines: list | None = None,
    warmups_by_rank: list | None = None,
    timelines: list | None = None,
    clock: dict | None = None,
    repeat_rule: dict | None = None,
    nvtx: str = "off",
    kernels: list | None = None,
    host: dict | None = None,
    wall: dict | None = None,
) -> dict:
    """Assemble report.json (schema 1; see docs/report.md). ``timelines``: per rank its repeats' spans (the last
    TIMELINE_REPEATS are kept); ``warmups_by_rank``: each rank's warm-up repeats' phases."""
    timings, medians = summarize(records_by_rank)
    steps = (result or {}).get("steps_per_repeat")
    captured = combine(kernels, records_by_rank, steps) if kernels else None
    warmups = warmups_by_rank or [[] for _ in records_by_rank]
    report = {
        "schema": REPORT_SCHEMA,
        "spmd_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "workload": cfg.workload,
        "ranks": ctx.size,
        "nodes": nodes,
        "launch": launch_record(ctx),
        "placement": placement,
        "host": host,
        "wall": wall,
        "warnings": list(ctx.warnings),
        "device": ctx.device,
        "comm": comm_name,
        "mpi_library": mpi_library(),
        "verified": verified,
        "verification": verification,
        "result": result,
        "timings": timings,
        "intervals": intervals(records_by_rank),
        "metrics": metrics_fn(medians),
        "problem": problem or {},
        # how each rank read its input: config io, and per rank the engine of each piece (None: not said)
        "io": {**cfg.to_dict()["io"], "per_rank": engines} if engines and any(engines) else None,
        "per_rank": [
            {"rank": r, "host": ctx.hosts[r], "median": m, "repeats": recs, "warmup_repeats": warm}
            for r, (m, recs, warm) in enumerate(zip(medians, records_by_rank, warmups))
        ],
        "breakdown": breakdown(records_by_rank, ctx.hosts, captured, steps, device_sharing(host, ctx.hosts)),
        "kernels": captured,
        "timeline": {"clock": clock, "per_rank": [repeats[-TIMELINE_REPEATS:] for repeats in timelines]}
        if timelines
        else None,
        "nvtx": nvtx,
        "warmup": cfg.warmup,
        "repeats": len(records_by_rank[0]),
        "repeat_rule": repeat_rule or {"rule": "fixed", "repeats": len(records_by_rank[0])},
        "config": cfg.to_dict(),
    }
    report["findings"] = findings(report)
    return report


def completed(report: dict) -> dict:
    """A checked report.json with what report.html draws that an earlier spmd did not record (intervals, the
    breakdown, findings) computed from its per-rank repeats; no timeline where it has none."""
    records = [r["repeats"] for r in report["per_rank"]]
    hosts = [str(r.get("host", "?")) for r in report["per_rank"]]
    out = {
        "intervals": intervals(records),
        "breakdown": breakdown(records, hosts, sharing=device_sharing(report.get("host"), hosts)),
        "timeline": None,
        "nvtx": "off",
        "spmd_version": "?",
        "created": "?",
        **report,
    }
    out["findings"] = report.get("findings") or findings(out)
    return out


def with_capture(report: dict, kernels: dict | None, seconds: float) -> dict:
    """A timed run's report with the steps another run of its job captured later (a sweep's capture pass, so that
    no timed step follows a capture): its ``kernels`` (the capture's cost against this run's steps), the breakdown
    and the straggler's cause from this run's own repeats, the findings again; ``seconds`` (the capture run's whole
    wall time) its ``wall.capture``."""
    records = [r["repeats"] for r in report["per_rank"]]
    hosts = [str(r.get("host", "?")) for r in report["per_rank"]]
    steps = (report.get("result") or {}).get("steps_per_repeat")
    captured = retimed(kernels, records, steps)
    sharing = device_sharing(report.get("host"), hosts)
    out = {**report, "kernels": captured, "breakdown": breakdown(records, hosts, captured, steps, sharing)}
    if out.get("wall") is not None:
        out["wall"] = {**out["wall"], "capture": seconds}
    out["findings"] = findings(out)
    return out

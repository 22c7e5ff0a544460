"""report.json: the timings gathered to rank 0, summarized, with what ran where and its result."""

from __future__ import annotations

import datetime

from ..version import __version__
from ..launch import launch_record, mpi_library
from .schema import REPORT_SCHEMA
from .summary import summarize


def build_report(*, cfg, ctx, comm_name: str, records_by_rank, nodes, verification: dict, verified: bool,
                 result: dict, metrics_fn, problem: dict | None = None, placement: dict | None = None,
                 engines: list | None = None) -> dict:
    """Assemble report.json (schema 1; see docs/report.md)."""
    timings, medians = summarize(records_by_rank)
    return {
        "schema": REPORT_SCHEMA,
        "spmd_version": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "workload": cfg.workload,
        "ranks": ctx.size,
        "nodes": nodes,
        "launch": launch_record(ctx),
        "placement": placement,
        "warnings": list(ctx.warnings),
        "device": ctx.device,
        "comm": comm_name,
        "mpi_library": mpi_library(),
        "verified": verified,
        "verification": verification,
        "result": result,
        "timings": timings,
        "metrics": metrics_fn(medians),
        "problem": problem or {},
        # how each rank read its input: config io, and per rank the engine of each piece (None: not said)
        "io": {**cfg.to_dict()["io"], "per_rank": engines} if engines and any(engines) else None,
        "per_rank": [{"rank": r, "host": ctx.hosts[r], "median": m, "repeats": recs}
                     for r, (m, recs) in enumerate(zip(medians, records_by_rank))],
        "warmup": cfg.warmup,
        "repeats": cfg.repeats,
        "config": cfg.to_dict(),
    }

"""``spmd run CONFIG``: one job, its report.json, report.html and trace."""

from __future__ import annotations

import sys

from ..core.errors import one_line


def cmd_run(args) -> int:
    from ..core.faults import fault_from, require_rank
    from ..core.progress import Progress, wanted
    from ..core.runtime import Context
    from ..job import run_job
    from ..report.table import format_report
    from ..workloads.registry import agree_on_config

    with Context(watchdog=True) as ctx:
        cfg = agree_on_config(ctx, args.config, args.override)
        ctx.agree(lambda: require_rank(fault_from(cfg.fault), ctx.size))
        progress = Progress(f"spmd run: {cfg.workload}", wanted(ctx.rank, args.progress, args.quiet))
        job = run_job(ctx, cfg, args.out or cfg.output, progress=progress, trace=args.trace, nvtx=args.nvtx)
        if ctx.rank == 0:
            for warning in job.report["warnings"]:
                print(f"spmd: warning: {one_line(warning)}", file=sys.stderr, flush=True)
            if not args.quiet:
                print(format_report(job.report, str(job.path)), flush=True)
                if args.trace:
                    print(
                        f"trace: {one_line(args.trace)} (open it in https://ui.perfetto.dev or chrome://tracing)",
                        flush=True,
                    )
    return 0

"""``spmd run CONFIG``: one job, its report.json, report.html and trace."""

from __future__ import annotations

import sys

from ..core.errors import one_line
from .arguments import CAPTURE, with_config


def add_parser(sub) -> None:
    """``spmd run``'s flags."""
    run = with_config(sub.add_parser("run", help="run a workload under mpiexec/srun and write report.json"))
    run.add_argument("--out", metavar="DIR", help="output folder (default: the config's output)")
    run.add_argument("-q", "--quiet", action="store_true", help="print nothing on success, no progress lines")
    run.add_argument(
        "--progress",
        action="store_true",
        help="a line on stderr after each repeat also when stderr is not a terminal (a batch job's "
        "log; on a terminal they are shown anyway)",
    )
    run.add_argument(
        "--trace",
        metavar="FILE.json",
        help="also write a Chrome trace of every phase of every repeat of every rank on one clock "
        "(open it in Perfetto or chrome://tracing)",
    )
    run.add_argument(
        "--nvtx",
        action="store_true",
        help="NVTX ranges for every repeat and phase, for Nsight Systems (on by itself under a profiler)",
    )
    run.add_argument("--capture", **CAPTURE)
    run.set_defaults(handler=cmd_run)


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

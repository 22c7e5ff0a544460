"""``spmd scale CONFIG``: a strong/weak sweep in one launch and its scaling report."""

from __future__ import annotations

import sys

from ..core.errors import one_line


def cmd_scale(args) -> int:
    from ..core.files import require_writable_folder
    from ..core.progress import Progress, wanted
    from ..core.runtime import Context
    from ..scale.render.write import require_scaling_outputs, write_scaling
    from ..scale.sweep.run import parse_batches, parse_ranks, run_scale
    from ..workloads.base import SCALING_MODES
    from ..workloads.registry import agree_on_config

    with Context(watchdog=True) as ctx:
        cfg = agree_on_config(ctx, args.config, args.override)
        ranks = ctx.agree(parse_ranks, args.ranks, ctx.size)
        out = args.out or f"{cfg.output}/scaling"
        ctx.agree(require_writable_folder, out, "output folder")  # before the sweep, not after it
        ctx.agree(require_scaling_outputs, out, root_only=True)
        modes = list(SCALING_MODES) if args.mode == "both" else [args.mode]
        batches = ctx.agree(parse_batches, args.batches)
        if args.trace:
            ctx.agree(require_writable_folder, args.trace, "trace folder")
        scaling = run_scale(
            ctx,
            cfg,
            ranks,
            modes,
            args.probe_max_bytes,
            progress=not args.quiet,
            compare_comm=args.compare_comm == "all",
            batches=batches,
            live=Progress("spmd scale", wanted(ctx.rank, args.progress, args.quiet)),
            trace_dir=args.trace,
            nvtx=args.nvtx,
        )
        paths = ctx.agree(lambda: write_scaling(scaling, out), root_only=True)
        if ctx.rank == 0 and not args.quiet:
            print(
                "\n".join(
                    ["", "findings:"]
                    + [f"  - {one_line(line)}" for line in scaling["advice"]]
                    + ["", f"wrote {len(paths)} file(s) to {one_line(out)}: " + ", ".join(p.name for p in paths)]
                ),
                flush=True,
            )
        if ctx.rank == 0:
            note_no_plots()
    return 0


def note_no_plots() -> None:
    """Say so when a scaling report was written without its plots, and how to get them."""
    from ..report.png import NO_MATPLOTLIB, available

    if not available():
        print(f"spmd: note: no plots written: {NO_MATPLOTLIB}; the tables are all there", file=sys.stderr, flush=True)

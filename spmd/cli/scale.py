"""``spmd scale CONFIG``: a strong/weak sweep in one launch and its scaling report."""

from __future__ import annotations

import sys

from ..core.errors import one_line
from .arguments import CAPTURE, byte_size, with_config


def add_parser(sub) -> None:
    """``spmd scale``'s flags."""
    scale = with_config(
        sub.add_parser("scale", help="strong/weak scaling sweep in one launch: scaling.json, .md, .html and plots")
    )
    scale.add_argument(
        "--ranks", metavar="N,N,...", help="group sizes to run (default: 1, 2, 4, ... and the launch size)"
    )
    scale.add_argument(
        "--mode",
        choices=("strong", "weak", "both"),
        default="strong",
        help="strong: fixed global problem; weak: fixed problem per rank (default strong)",
    )
    scale.add_argument(
        "--batches",
        metavar="B,B,...",
        help="also a batch sweep (workloads with params.batch: torch, train): each per-GPU batch on 1 "
        "rank and on the most ranks, the batch x GPUs table and where more GPUs pay off",
    )
    scale.add_argument(
        "--shares",
        metavar="N,N,...",
        help="rank counts this launch cannot run (e.g. 2,4 on one GPU): also run one rank holding what each rank "
        "of a strong run at N ranks holds (training: params.batch / N), reading with the threads such a rank gets, "
        "so spmd predict carries the sweep to them",
    )
    scale.add_argument("--out", metavar="DIR", help="output folder (default: <config output>/scaling)")
    scale.add_argument(
        "--probe-max-bytes",
        type=byte_size,
        default=16 << 20,
        metavar="SIZE",
        help="time the workload's collectives up to SIZE per rank for the comm model "
        "(default 16M; 0 = fit to the workload's own comm phases)",
    )
    scale.add_argument(
        "--compare-comm",
        choices=("all", "none"),
        default="all",
        help="on GPUs, also time the workload's own collectives on every backend that can run "
        "(nccl, mpi, mpi-cuda), so the findings name the fastest (default all)",
    )
    scale.add_argument(
        "--trace",
        metavar="DIR",
        help="a Chrome trace of each run of the sweep, DIR/<series>-<ranks>.json (Perfetto opens them)",
    )
    scale.add_argument(
        "--nvtx", action="store_true", help="NVTX ranges for every repeat and phase (on by itself under a profiler)"
    )
    scale.add_argument("-q", "--quiet", action="store_true", help="no progress lines or summary")
    scale.add_argument(
        "--progress",
        action="store_true",
        help="lines on stderr as each size starts and after each repeat also when stderr is not a "
        "terminal (on a terminal they are shown anyway)",
    )
    scale.add_argument("--capture", **CAPTURE)
    scale.set_defaults(handler=cmd_scale)


def cmd_scale(args) -> int:
    from ..core.files import require_writable_folder
    from ..core.progress import Progress, wanted
    from ..core.runtime import Context
    from ..scale.render.write import require_scaling_outputs, write_scaling
    from ..scale.sweep.run import parse_batches, parse_ranks, parse_shares, run_scale
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
        shares = ctx.agree(parse_shares, args.shares, ranks)
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
            shares=shares,
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

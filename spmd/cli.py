"""The ``spmd`` command: subcommands ``run`` and ``generate``.

Failure rule: an error every rank agreed on (``SpmdError.collective``) is printed once by
rank 0 and every rank exits with its code; an error on some ranks only, or any
unexpected exception, is printed by the failing rank as ``rank R on HOST: cause`` and
aborts the whole MPI job, so no rank is ever left waiting.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from . import __version__
from .errors import SpmdError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spmd", description="SPMD work on GPUs/CPUs under MPI, measured.")
    parser.add_argument("--version", action="version", version=f"spmd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_config(p):
        p.add_argument("config", help="YAML config (see docs/configs.md)")
        p.add_argument("-o", "--override", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config key, e.g. -o repeats=3 -o params.ddof=1 (repeatable)")
        return p

    run = with_config(sub.add_parser("run", help="run a workload under mpiexec/srun and write report.json"))
    run.add_argument("--out", metavar="DIR", help="output folder (default: the config's output)")
    run.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    run.set_defaults(func=cmd_run)

    gen = with_config(sub.add_parser("generate", help="write the input files a config names"))
    gen.add_argument("--force", action="store_true", help="rewrite files that are already up to date")
    gen.set_defaults(func=cmd_generate)
    return parser


def cmd_run(args) -> int:
    from .config import load_config
    from .job import run_job
    from .report import format_report
    from .runtime import Context

    ctx = Context()
    cfg = ctx.agree(load_config, args.config, args.override)
    report, path = run_job(ctx, cfg, args.out or cfg.output)
    if ctx.rank == 0 and not args.quiet:
        print(format_report(report, str(path)), flush=True)
    ctx.close()
    return 0


def cmd_generate(args) -> int:
    from .config import load_config
    from .io.generate import generate, target_files
    from .runtime import Context
    from .workloads import workload_class

    ctx = Context()
    cfg = ctx.agree(load_config, args.config, args.override)
    expected = workload_class(cfg.workload).expected_attrs
    written = ctx.agree(generate, cfg, expected, ctx.rank, ctx.size, args.force)
    written = [p for part in ctx.comm.gather(written, root=0) or [] for p in part]
    if ctx.rank == 0:
        total = len(target_files(cfg))
        print(f"spmd generate: wrote {len(written)} of {total} file(s)"
              + (f", {total - len(written)} already up to date" if len(written) < total else ""), flush=True)
        for path in written:
            print(f"  {path}")
    ctx.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SpmdError as exc:
        return _fail(exc, exc.exit_code, collective=exc.collective)
    except Exception as exc:  # a bug or an unexpected library error: name it, end the job
        return _fail(exc, 1, collective=False, trace=traceback.format_exc())


def _fail(exc: BaseException, code: int, collective: bool, trace: str | None = None) -> int:
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    if collective:
        if world.Get_rank() == 0:
            print(f"spmd: error: {exc}", file=sys.stderr, flush=True)
        return code
    where = f"rank {world.Get_rank()} on {MPI.Get_processor_name()}"
    if trace:
        sys.stderr.write("".join(f"[{where}] {line}\n" for line in trace.rstrip().splitlines()))
    print(f"spmd: error: {where}: {type(exc).__name__ + ': ' if trace else ''}{exc}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    if world.Get_size() > 1:
        world.Abort(code)  # the other ranks may be inside a collective: end them all
    return code

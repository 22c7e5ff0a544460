"""The ``spmd`` command: ``run``, ``scale``, ``generate``, ``bench comm``, ``topo``, ``info``, ``report``,
``jobscript``.

Failure rule: an error every rank agreed on (``SpmdError.collective``) is printed once by
rank 0 and every rank exits with its code; an error on some ranks only, or any
unexpected exception, is printed by the failing rank as ``rank R on HOST: cause`` and
aborts the whole MPI job, so no rank is ever left waiting.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from .version import __version__
from .config import COMM_BACKENDS
from .errors import SpmdError

INTERRUPT_GRACE_S = 2.0  # after Ctrl-C (no watchdog), rank r leaves r times this to the ranks below it
NEEDS_MPI = ("run", "scale", "bench", "topo", "info")  # generate runs alone without MPI; report and jobscript never need it


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
    run.add_argument("-q", "--quiet", action="store_true", help="print nothing on success, no progress lines")
    run.add_argument("--progress", action="store_true",
                     help="a line on stderr after each repeat also when stderr is not a terminal (a batch job's "
                          "log; on a terminal they are shown anyway)")
    run.set_defaults(func=cmd_run)

    scale = with_config(sub.add_parser(
        "scale", help="strong/weak scaling sweep in one launch: scaling.json, .md, .html and plots"))
    scale.add_argument("--ranks", metavar="N,N,...",
                       help="group sizes to run (default: 1, 2, 4, ... and the launch size)")
    scale.add_argument("--mode", choices=("strong", "weak", "both"), default="strong",
                       help="strong: fixed global problem; weak: fixed problem per rank (default strong)")
    scale.add_argument("--out", metavar="DIR", help="output folder (default: <config output>/scaling)")
    scale.add_argument("--probe-max-bytes", type=_byte_size, default=16 << 20, metavar="SIZE",
                       help="time the workload's collectives up to SIZE per rank for the comm model "
                            "(default 16M; 0 = fit to the workload's own comm phases)")
    scale.add_argument("--compare-comm", choices=("all", "none"), default="all",
                       help="on GPUs, also time the workload's own collectives on every backend that can run "
                            "(nccl, mpi, mpi-cuda), so the findings name the fastest (default all)")
    scale.add_argument("-q", "--quiet", action="store_true", help="no progress lines or summary")
    scale.add_argument("--progress", action="store_true",
                       help="lines on stderr as each size starts and after each repeat also when stderr is not a "
                            "terminal (on a terminal they are shown anyway)")
    scale.set_defaults(func=cmd_scale)

    report = sub.add_parser("report", help="compare or re-render written reports (no MPI launch needed)")
    rsub = report.add_subparsers(dest="report_command", required=True)
    cmp = rsub.add_parser("compare", help="per size and phase change between two report.json/scaling.json")
    cmp.add_argument("old", help="the earlier report.json or scaling.json")
    cmp.add_argument("new", help="the later one, of the same kind")
    cmp.add_argument("--fail-above", type=float, metavar="PCT",
                     help="exit 1 when a phase got slower by more than PCT percent")
    cmp.add_argument("--min-seconds", type=float, default=1e-4, metavar="S",
                     help="phases under S seconds in both reports never fail (noise; default 1e-4)")
    cmp.set_defaults(func=cmd_report_compare)
    merge = rsub.add_parser("merge", help="combine the report.json of separate jobs (one per node count) into "
                                           "one scaling report, as spmd scale writes it")
    merge.add_argument("reports", nargs="+", metavar="REPORT", help="report.json files (or folders holding one)")
    merge.add_argument("--out", metavar="DIR", required=True, help="output folder")
    merge.add_argument("-q", "--quiet", action="store_true", help="no summary")
    merge.set_defaults(func=cmd_report_merge)
    render = rsub.add_parser("render", help="rewrite scaling.md, scaling.html and the plots from scaling.json")
    render.add_argument("scaling", help="a scaling.json (spmd scale or spmd report merge wrote it)")
    render.add_argument("--out", metavar="DIR", help="output folder (default: the folder of SCALING)")
    render.add_argument("--reanalyse", action="store_true",
                        help="recompute figures, model and advice from the stored runs first")
    render.set_defaults(func=cmd_report_render)

    bench = sub.add_parser("bench", help="benchmarks under mpiexec: bench comm, bench io")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    comm = bsub.add_parser("comm", help="collectives over nccl / mpi / mpi-cuda, checked, in nccl-tests' units")
    comm.add_argument("--op", choices=("allreduce", "allgather", "gather", "reduce_scatter", "bcast", "sendrecv"),
                      default="allreduce", help="the collective to time (default allreduce)")
    comm.add_argument("--backend", choices=(*COMM_BACKENDS, "all", "auto"), default="auto",
                      help="all: every backend that can run here, side by side (default auto)")
    comm.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto",
                      help="where the buffers live: auto = a GPU per rank when there are enough (default auto)")
    comm.add_argument("--min-bytes", type=_byte_size, default=8, metavar="SIZE",
                      help="smallest message per rank, e.g. 8, 4K, 1M (default 8)")
    comm.add_argument("--max-bytes", type=_byte_size, default=64 << 20, metavar="SIZE",
                      help="largest message per rank (default 64M)")
    comm.add_argument("--factor", type=int, default=2, help="each size is the last times this (default 2)")
    comm.add_argument("--dtype", choices=("float32", "float64", "int32"), default="float32",
                      help="element type of the messages (default float32)")
    comm.add_argument("--iters", type=int, default=20, help="timed calls per size; the median is reported (default 20)")
    comm.add_argument("--warmup", type=int, default=5, help="untimed calls per size before them (default 5)")
    comm.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    comm.set_defaults(func=cmd_bench_comm)
    bio = with_config(bsub.add_parser(
        "io", help="each rank's read of the config's input by every engine, against plain pread and copy limits"))
    bio.add_argument("--rounds", type=int, default=5, help="timed rounds per way, after one untimed (default 5)")
    bio.add_argument("--cold", action="store_true",
                     help="drop the files' cached pages before each timed read (posix_fadvise; default: page cache)")
    bio.add_argument("--json", metavar="PATH", help="also write the measurements as JSON")
    bio.set_defaults(func=cmd_bench_io)

    topo = sub.add_parser("topo", help="GPUs of each node, their links, peer access, measured copy speeds")
    topo.add_argument("--bytes", type=_byte_size, default=256 << 20, metavar="SIZE",
                      help="bytes per bandwidth copy (default 256M)")
    topo.add_argument("--iters", type=int, default=10, help="timed copies per pair; the median is reported (default 10)")
    topo.add_argument("--json", metavar="PATH", help="write the measurements as JSON")
    topo.add_argument("--png", metavar="PATH", help="write the P2P bandwidth heat map (rank 0's node)")
    topo.set_defaults(func=cmd_topo)

    info = sub.add_parser("info", help="versions, CUDA-aware MPI or not, rank -> host -> GPU map, SLURM")
    info.add_argument("--json", metavar="PATH", help="also write it as JSON")
    info.set_defaults(func=cmd_info)

    gen = with_config(sub.add_parser("generate", help="write the input files a config names"))
    gen.add_argument("--force", action="store_true", help="rewrite files that are already up to date")
    gen.set_defaults(func=cmd_generate)

    job = with_config(sub.add_parser(
        "jobscript", help="sbatch files of a strong/weak series across node counts, and submit.sh (no MPI)"))
    job.add_argument("--nodes", required=True, metavar="N,N,...", help="node counts, e.g. 1,2,4")
    job.add_argument("--gpus-per-node", type=int, required=True, metavar="G", help="GPUs per node (0: a CPU series)")
    job.add_argument("--tasks-per-node", type=int, metavar="T", help="ranks per node (default: one per GPU)")
    job.add_argument("--mode", choices=("strong", "weak", "both"), default="both",
                     help="strong: the config's problem at every node count; weak: it grows with the nodes (default both)")
    job.add_argument("--partition", help="#SBATCH --partition of every job (default: the cluster's)")
    job.add_argument("--account", help="#SBATCH --account of every job (default: none given)")
    job.add_argument("--time", default="00:30:00", help="each job's time limit (default 00:30:00)")
    job.add_argument("--mpi", default="pmi2", help="srun --mpi plugin: pmi2 (MPICH, Open MPI) or pmix (default pmi2)")
    job.add_argument("--spmd", metavar="COMMAND",
                     help="how the jobs call spmd (default: this Python with -m spmd, so a virtual environment's "
                          "spmd is the one the jobs run)")
    job.add_argument("--out", metavar="DIR", help="output folder (default: <config output>/jobs)")
    job.set_defaults(func=cmd_jobscript)
    return parser


def cmd_run(args) -> int:
    from .faults import fault_from, require_rank
    from .job import run_job
    from .progress import Progress, wanted
    from .report.table import format_report
    from .runtime import Context
    from .workloads.registry import load_job_config

    with Context(watchdog=True) as ctx:
        cfg = ctx.agree(load_job_config, args.config, args.override)
        ctx.agree(lambda: require_rank(fault_from(cfg.fault), ctx.size))
        progress = Progress(f"spmd run: {cfg.workload}", wanted(ctx.rank, args.progress, args.quiet))
        job = run_job(ctx, cfg, args.out or cfg.output, progress=progress)
        if ctx.rank == 0:
            for warning in job.report["warnings"]:
                print(f"spmd: warning: {warning}", file=sys.stderr, flush=True)
            if not args.quiet:
                print(format_report(job.report, str(job.path)), flush=True)
    return 0


def cmd_scale(args) -> int:
    from .files import require_writable_folder
    from .progress import Progress, wanted
    from .runtime import Context
    from .scale.render import write_scaling
    from .scale.sweep import parse_ranks, run_scale
    from .workloads.base import SCALING_MODES
    from .workloads.registry import load_job_config

    with Context(watchdog=True) as ctx:
        cfg = ctx.agree(load_job_config, args.config, args.override)
        ranks = ctx.agree(parse_ranks, args.ranks, ctx.size)
        out = args.out or f"{cfg.output}/scaling"
        ctx.agree(require_writable_folder, out, "output folder")  # before the sweep, not after it
        modes = list(SCALING_MODES) if args.mode == "both" else [args.mode]
        scaling = run_scale(ctx, cfg, ranks, modes, args.probe_max_bytes, progress=not args.quiet,
                            compare_comm=args.compare_comm == "all",
                            live=Progress("spmd scale", wanted(ctx.rank, args.progress, args.quiet)))
        paths = ctx.agree(lambda: write_scaling(scaling, out), root_only=True)
        if ctx.rank == 0 and not args.quiet:
            print("\n".join(["", "findings:"] + [f"  - {line}" for line in scaling["advice"]]
                            + ["", f"wrote {len(paths)} file(s) to {out}: " + ", ".join(p.name for p in paths)]),
                  flush=True)
        if ctx.rank == 0:
            _note_no_plots()
    return 0


def _note_no_plots() -> None:
    """Say so when a scaling report was written without its plots, and how to get them."""
    from .scale.plots import NO_MATPLOTLIB, available

    if not available():
        print(f"spmd: note: no plots written: {NO_MATPLOTLIB}; the tables are all there", file=sys.stderr, flush=True)


def cmd_bench_comm(args) -> int:
    from .errors import ConfigError, VerificationError
    from .files import write_json_atomic
    from .measure.comm import bench_comm, format_tables, size_series
    from .runtime import Context

    def check():
        if args.iters < 1 or args.warmup < 0:
            raise ConfigError("--iters must be >= 1 and --warmup >= 0")
        try:
            return size_series(args.min_bytes, args.max_bytes, args.factor)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    with Context(watchdog=True) as ctx:
        size_list = ctx.agree(check)
        ctx.bind_device(args.device)
        backends = list(COMM_BACKENDS) if args.backend == "all" else [args.backend]
        result = bench_comm(ctx, args.op, backends, size_list, args.dtype, args.iters, args.warmup,
                            explicit=args.backend != "all")
        result["nodes"] = ctx.layout()
        if ctx.rank == 0:
            print(format_tables(result), end="", flush=True)
        if args.json:
            ctx.agree(lambda: write_json_atomic(args.json, result), root_only=True)
        if result["wrong"]:
            raise ctx.collective_error(VerificationError, 0, f"{result['wrong']} element(s) wrong in "
                                       f"{args.op} results (see #wrong)")
    return 0


def cmd_bench_io(args) -> int:
    from .errors import ConfigError
    from .files import write_json_atomic
    from .io.hdf5 import expand_shards, plan_rank_input
    from .measure.io import bench_io, format_io
    from .runtime import Context
    from .workloads.registry import load_job_config
    from .workloads.rows import NUMBERS

    with Context(watchdog=True) as ctx:
        cfg = ctx.agree(load_job_config, args.config, args.override)
        if args.rounds < 1:
            raise ctx.collective_error(ConfigError, 0, f"--rounds: at least 1, got {args.rounds}")
        ctx.bind_device(cfg.device, cfg.allow_shared_gpu)
        shards = ctx.agree(expand_shards, cfg.input.shards, root_only=True) if cfg.input.shards is not None else None
        plan = ctx.agree(plan_rank_input, cfg.input, shards, ctx.rank, ctx.size, NUMBERS, (1, 2))
        result = bench_io(ctx, plan, cfg.io, args.rounds, args.cold)
        if ctx.rank == 0:
            print(format_io(result), end="", flush=True)
        if args.json:
            ctx.agree(lambda: write_json_atomic(args.json, result), root_only=True)
    return 0


def cmd_topo(args) -> int:
    from .files import write_bytes_atomic, write_json_atomic
    from .measure.copies import format_topology, measure_topology
    from .runtime import Context
    from .scale.plots import NO_MATPLOTLIB, heatmap_png

    with Context(watchdog=True) as ctx:
        # One rank per node measures its node (NVML and CUDA see all of the node's GPUs).
        mine = (ctx.host, measure_topology(args.bytes, args.iters)) if ctx.local_rank == 0 else None
        nodes = [n for n in ctx.comm.gather(mine, root=0) or [] if n]
        if ctx.rank == 0:
            print("\n".join(format_topology(host, topo) for host, topo in nodes), end="", flush=True)

        def write():
            if args.json:
                write_json_atomic(args.json, {host: topo for host, topo in nodes})
            png = heatmap_png(*nodes[0]) if args.png else None
            if png:
                write_bytes_atomic(args.png, png)
            elif args.png:
                host, topo = nodes[0]
                why = (f"{host} has no GPU (run it where the GPUs are)" if not topo["gpus"] else NO_MATPLOTLIB)
                print(f"spmd: note: no heat map written to {args.png}: {why}", file=sys.stderr, flush=True)

        ctx.agree(write, root_only=True)
    return 0


def cmd_info(args) -> int:
    from .files import write_json_atomic
    from .info import format_info, gather_info
    from .runtime import Context

    with Context(watchdog=True) as ctx:
        info = gather_info(ctx)
        if ctx.rank == 0:
            print(format_info(info), end="", flush=True)
        if args.json:
            ctx.agree(lambda: write_json_atomic(args.json, info), root_only=True)
    return 0


def cmd_report_compare(args) -> int:
    from .report.compare import compare_files, format_compare

    rows, slower = compare_files(args.old, args.new, args.fail_above, args.min_seconds)
    print(format_compare(rows, slower, args.fail_above), flush=True)
    return 1 if slower else 0


def cmd_report_render(args) -> int:
    from pathlib import Path

    from .report.schema import check_scaling, read_json
    from .scale.render import write_scaling

    scaling = check_scaling(read_json(args.scaling, "a scaling.json"), args.scaling)
    if args.reanalyse:
        from .scale.analysis import reanalyse

        scaling = reanalyse(scaling)
    paths = write_scaling(scaling, args.out or Path(args.scaling).parent)
    print(f"wrote {', '.join(str(p) for p in paths)}", flush=True)
    _note_no_plots()
    return 0


def cmd_report_merge(args) -> int:
    from pathlib import Path

    from .scale.merge import merge_reports
    from .scale.render import write_scaling

    paths = [Path(p) / "report.json" if Path(p).is_dir() else Path(p) for p in args.reports]
    scaling = merge_reports(paths)
    written = write_scaling(scaling, args.out)
    if not args.quiet:
        print("\n".join(["findings:"] + [f"  - {line}" for line in scaling["advice"]]
                        + ["", f"wrote {len(written)} file(s) to {args.out}: " + ", ".join(p.name for p in written)]),
              flush=True)
    _note_no_plots()
    return 0


def cmd_jobscript(args) -> int:
    from .jobscript import parse_nodes, write_jobscripts
    from .workloads.registry import load_job_config

    cfg = load_job_config(args.config, args.override)
    out = args.out or f"{cfg.output}/jobs"
    written = write_jobscripts(cfg, args.config, parse_nodes(args.nodes), out, gpus_per_node=args.gpus_per_node,
                               tasks_per_node=args.tasks_per_node,
                               modes=("strong", "weak") if args.mode == "both" else (args.mode,),
                               partition=args.partition, account=args.account, time=args.time, mpi=args.mpi,
                               spmd=args.spmd)
    print(f"wrote {len(written)} file(s) to {out}; submit them with: bash {out}/submit.sh", flush=True)
    return 0


def _byte_size(text: str) -> int:
    from .units import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_generate(args) -> int:
    from .io.generate import generate, target_files
    from .workloads.registry import load_job_config, workload_class

    def say(cfg, workload, written):
        total = len(target_files(cfg, workload))
        print(f"spmd generate: wrote {len(written)} of {total} file(s)"
              + (f", {total - len(written)} already up to date" if len(written) < total else ""), flush=True)
        for path in written:
            print(f"  {path}")

    from .launch import mpi_missing

    if mpi_missing():  # one process writes everything (under mpiexec the ranks share the files)
        cfg = load_job_config(args.config, args.override)
        workload = workload_class(cfg.workload)
        say(cfg, workload, generate(cfg, workload, 0, 1, args.force))
        return 0
    from .runtime import Context

    with Context(watchdog=True) as ctx:
        cfg = ctx.agree(load_job_config, args.config, args.override)
        workload = workload_class(cfg.workload)
        written = ctx.agree(generate, cfg, workload, ctx.rank, ctx.size, args.force)
        written = [p for part in ctx.comm.gather(written, root=0) or [] for p in part]
        if ctx.rank == 0:
            say(cfg, workload, written)
    return 0


def main(argv: list[str] | None = None) -> int:
    from .stops import handling_interrupts

    from .launch import MPI_FIX, mpi_missing

    args = build_parser().parse_args(argv)
    if args.command in NEEDS_MPI:
        why = mpi_missing()
        if why:  # one line, no traceback: the fix, not the stack
            print(f"spmd: error: spmd {args.command} runs under MPI, and no MPI library could be loaded ({why}): "
                  f"{MPI_FIX}", file=sys.stderr, flush=True)
            return 2
    with handling_interrupts():
        return _run(args)


def _run(args) -> int:
    try:
        return args.func(args)
    except KeyboardInterrupt:  # Ctrl-C where no watchdog runs (see spmd.stops)
        return _interrupted()
    except SpmdError as exc:
        # A collective error has closed the command's Context (and stopped its watchdog) on every rank.
        # report and jobscript run as one plain process: their errors need no rank label.
        return _fail(exc, exc.exit_code, collective=exc.collective or args.command in ("report", "jobscript"))
    except Exception as exc:  # a bug in a plug-in or spmd, or an unexpected library error: name it, end the job
        from .workloads.plugins import plugin_frame

        where = plugin_frame(exc)  # a plug-in's code: say where in it, as map_reduce does
        return _fail(exc, 1, collective=False, trace=traceback.format_exc(), where=where)


def _interrupted() -> int:
    from .stops import EXIT_CODE

    from .launch import mpi_loaded

    MPI = mpi_loaded()
    if MPI is None:  # one process, no MPI job to end
        print(f"spmd: interrupted (SIGINT) (exit {EXIT_CODE})", file=sys.stderr, flush=True)
        return EXIT_CODE
    world = MPI.COMM_WORLD
    if world.Get_rank() > 0:
        import time

        # The launcher signals every rank, but a rank blocked in a collective (waiting for the ranks that
        # already stopped) never sees it. Rank r waits r steps before it speaks and ends the job, so one
        # rank, the lowest that can, does: the first abort ends the others' waits.
        time.sleep(INTERRUPT_GRACE_S * min(world.Get_rank(), 5))
    print(f"spmd: interrupted (SIGINT): ending the job (exit {EXIT_CODE})", file=sys.stderr, flush=True)
    if world.Get_size() > 1:
        from .watchdog import end_job

        end_job(world, EXIT_CODE)  # the other ranks may be inside a collective
    return EXIT_CODE


def _fail(exc: BaseException, code: int, collective: bool, trace: str | None = None, where: str | None = None) -> int:
    import time

    from .launch import mpi_loaded

    MPI = mpi_loaded()
    if MPI is None:  # a command that never loaded MPI (report, jobscript, generate without MPI): one process
        if trace:
            sys.stderr.write(trace)
        named = f"{where}: " if where else ""
        print(f"spmd: error: {named}{type(exc).__name__ + ': ' if trace else ''}{exc}", file=sys.stderr, flush=True)
        return code
    from .watchdog import ending

    while ending():  # the watchdog is ending the job (exit 4): this error is its echo
        time.sleep(1.0)
    world = MPI.COMM_WORLD
    if collective:
        if world.Get_rank() == 0:
            label = {0: "stopped", 130: "interrupted"}.get(code, "error")
            print(f"spmd: {label}: {exc}", file=sys.stderr, flush=True)
        return code
    where_rank = f"rank {world.Get_rank()} on {MPI.Get_processor_name()}"
    if trace:
        sys.stderr.write("".join(f"[{where_rank}] {line}\n" for line in trace.rstrip().splitlines()))
    named = f"{where}: " if where else ""
    print(f"spmd: error: {where_rank}: {named}{type(exc).__name__ + ': ' if trace else ''}{exc}", file=sys.stderr,
          flush=True)
    sys.stdout.flush()
    if world.Get_size() > 1:
        from .watchdog import end_job

        end_job(world, code)  # the other ranks may be inside a collective: end them all
    return code

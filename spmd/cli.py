"""The ``spmd`` command: ``run``, ``scale``, ``generate``, ``bench comm``, ``topo``, ``info``, ``report``,
``jobscript``.

Failure rule: an error every rank agreed on (``SpmdError.collective``) is printed once by
rank 0 and every rank exits with its code; an error on some ranks only, or any
unexpected exception, is printed by the failing rank as ``rank R on HOST: cause`` and
aborts the whole MPI job, so no rank is ever left waiting.
"""

from __future__ import annotations

import sys
import traceback

from .arguments import build_parser
from .config import COMM_BACKENDS
from .errors import SpmdError, brief, one_line

INTERRUPT_GRACE_S = 2.0  # after Ctrl-C (no watchdog), rank r leaves r times this to the ranks below it
NEEDS_MPI = (
    "run",
    "scale",
    "bench",
    "topo",
    "info",
)  # generate runs alone without MPI; report and jobscript never need it


def cmd_run(args) -> int:
    from .faults import fault_from, require_rank
    from .job import run_job
    from .progress import Progress, wanted
    from .report.table import format_report
    from .runtime import Context
    from .workloads.registry import agree_on_config

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


def cmd_scale(args) -> int:
    from .files import require_writable_folder
    from .progress import Progress, wanted
    from .runtime import Context
    from .scale.render import require_scaling_outputs, write_scaling
    from .scale.sweep import parse_batches, parse_ranks, run_scale
    from .workloads.base import SCALING_MODES
    from .workloads.registry import agree_on_config

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
        ctx.agree(_require_outputs, args.json, root_only=True)
        ctx.bind_device(args.device)
        backends = list(COMM_BACKENDS) if args.backend == "all" else [args.backend]
        result = bench_comm(
            ctx, args.op, backends, size_list, args.dtype, args.iters, args.warmup, explicit=args.backend != "all"
        )
        result["nodes"] = ctx.layout()
        if ctx.rank == 0:
            print(format_tables(result), end="", flush=True)
        if args.json:
            ctx.agree(lambda: write_json_atomic(args.json, result), root_only=True)
        if result["wrong"]:
            raise ctx.collective_error(
                VerificationError, 0, f"{result['wrong']} element(s) wrong in {args.op} results (see #wrong)"
            )
    return 0


def cmd_bench_io(args) -> int:
    from .errors import ConfigError
    from .files import write_json_atomic
    from .io.hdf5 import expand_shards, plan_rank_input
    from .measure.io import bench_io, format_io
    from .runtime import Context
    from .workloads.registry import agree_on_config
    from .workloads.rows import NUMBERS

    with Context(watchdog=True) as ctx:
        cfg = agree_on_config(ctx, args.config, args.override)
        if args.rounds < 1:
            raise ctx.collective_error(ConfigError, 0, f"--rounds: at least 1, got {args.rounds}")
        ctx.agree(_require_outputs, args.json, root_only=True)
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
        ctx.agree(_require_outputs, args.json, args.png, root_only=True)
        # One rank per node measures its node (NVML and CUDA see all of the node's GPUs).
        mine = (ctx.host, measure_topology(args.bytes, args.iters)) if ctx.local_rank == 0 else None
        nodes = [n for n in ctx.comm.gather(mine, root=0) or [] if n]
        if ctx.rank == 0:
            print("\n".join(format_topology(host, topo) for host, topo in nodes), end="", flush=True)

        def write():
            if args.json:
                write_json_atomic(args.json, {"nodes": {host: topo for host, topo in nodes}})
            png = heatmap_png(*nodes[0]) if args.png else None
            if png:
                write_bytes_atomic(args.png, png)
            elif args.png:
                host, topo = nodes[0]
                why = f"{host} has no GPU (run it where the GPUs are)" if not topo["gpus"] else NO_MATPLOTLIB
                print(f"spmd: note: no heat map written to {one_line(args.png)}: {why}", file=sys.stderr, flush=True)

        ctx.agree(write, root_only=True)
    return 0


def cmd_info(args) -> int:
    from .files import write_json_atomic
    from .info import format_info, gather_info
    from .runtime import Context

    with Context(watchdog=True) as ctx:
        ctx.agree(_require_outputs, args.json, root_only=True)
        info = gather_info(ctx)
        if ctx.rank == 0:
            print(format_info(info), end="", flush=True)
        if args.json:
            ctx.agree(lambda: write_json_atomic(args.json, info), root_only=True)
    return 0


def _require_outputs(*paths) -> None:
    """Refuse, before any measurement, an output path (``--json``, ``--png``) holding a file spmd did not write."""
    from .files import require_replaceable

    for path in paths:
        if path is not None:
            require_replaceable(path)


def cmd_report_compare(args) -> int:
    from .report.compare import compare_files, format_compare

    rows, slower = compare_files(args.old, args.new, args.fail_above, args.min_seconds)
    print(format_compare(rows, slower, args.fail_above), flush=True)
    return 1 if slower else 0


def cmd_report_render(args) -> int:
    from pathlib import Path

    from .report.schema import check_scaling, read_json
    from .scale.render import require_scaling_outputs, write_scaling

    data = read_json(args.scaling, "a scaling.json or report.json")
    if isinstance(data, dict) and data.get("kind") != "scaling" and "timings" in data:
        from .files import require_replaceable, write_text_atomic
        from .report.build import completed
        from .report.html import run_html
        from .report.schema import check_report

        report = completed(check_report(data, args.scaling))
        target = Path(args.out or Path(args.scaling).parent) / "report.html"
        require_replaceable(target, "the report", fix="remove it or choose another --out")
        write_text_atomic(target, run_html(report))
        print(f"wrote {one_line(target)}", flush=True)
        return 0
    scaling = check_scaling(data, args.scaling)
    require_scaling_outputs(args.out or Path(args.scaling).parent)
    if args.reanalyse:
        from .scale.analysis import reanalyse

        scaling = reanalyse(scaling)
    paths = write_scaling(scaling, args.out or Path(args.scaling).parent)
    print(f"wrote {', '.join(one_line(p) for p in paths)}", flush=True)
    _note_no_plots()
    return 0


def cmd_report_merge(args) -> int:
    import glob
    from pathlib import Path

    from .errors import InputError
    from .scale.merge import merge_reports
    from .scale.render import require_scaling_outputs, write_scaling

    if len(args.reports) == 1 and glob.has_magic(args.reports[0]) and not Path(args.reports[0]).exists():
        # a shell glob that matched nothing reaches spmd as it was typed
        raise InputError(f"no report.json matched {one_line(args.reports[0])[:200]}")
    paths = [Path(p) / "report.json" if Path(p).is_dir() else Path(p) for p in args.reports]
    require_scaling_outputs(args.out)
    scaling = merge_reports(paths)
    written = write_scaling(scaling, args.out)
    if not args.quiet:
        print(
            "\n".join(
                ["findings:"]
                + [f"  - {one_line(line)}" for line in scaling["advice"]]
                + ["", f"wrote {len(written)} file(s) to {one_line(args.out)}: " + ", ".join(p.name for p in written)]
            ),
            flush=True,
        )
    _note_no_plots()
    return 0


def cmd_jobscript(args) -> int:
    from .jobscript import JobOptions, parse_nodes, series_summary, write_jobscripts
    from .workloads.registry import load_job_config

    cfg = load_job_config(args.config, args.override)
    out = args.out or f"{cfg.output}/jobs"
    nodes, modes = parse_nodes(args.nodes), ("strong", "weak") if args.mode == "both" else (args.mode,)
    options = JobOptions(
        args.gpus_per_node,
        args.tasks_per_node,
        args.cpus_per_task,
        args.partition,
        args.account,
        args.time,
        args.mpi,
        args.spmd,
        tuple(args.prologue),
        tuple(args.env),
    )
    written = write_jobscripts(cfg, args.config, nodes, out, options, modes)
    print(
        f"wrote {len(written)} file(s) to {one_line(out)}; submit them with: bash {one_line(out)}/submit.sh\n"
        f"  {series_summary(nodes, modes)}",
        flush=True,
    )
    return 0


def cmd_generate(args) -> int:
    from .io.generate import plan_inputs, write_inputs
    from .launch import mpi_missing
    from .workloads.registry import load_job_config, workload_class

    def say(plan, written):
        print(
            f"spmd generate: wrote {len(written)} of {plan.total} file(s)"
            + (f", {len(plan.current)} already up to date" if plan.current else "")
            + (f", {len(plan.users)} of yours left as they are" if plan.users else "")
            + (f", {len(plan.not_made)} not made (their input holds files of yours)" if plan.not_made else ""),
            flush=True,
        )
        for path in written:
            print(f"  {one_line(path)}")

    if mpi_missing():  # one process writes everything (under mpiexec the ranks share the files)
        cfg = load_job_config(args.config, args.override)
        workload = workload_class(cfg.workload)
        plan = plan_inputs(cfg, workload, args.force, args.skip_user_files)
        say(plan, write_inputs(plan, workload))
        return 0
    from .runtime import Context
    from .workloads.registry import agree_on_config

    with Context(watchdog=True) as ctx:
        cfg = agree_on_config(ctx, args.config, args.override)
        workload = workload_class(cfg.workload)
        # every file checked (a user's refused, the space there) before any rank writes one
        plan = ctx.agree(plan_inputs, cfg, workload, args.force, args.skip_user_files, root_only=True)
        written = ctx.agree(write_inputs, plan, workload, ctx.rank, ctx.size)
        written = [p for part in ctx.comm.gather(written, root=0) or [] for p in part]
        if ctx.rank == 0:
            say(plan, written)
    return 0


COMMANDS = {
    "run": cmd_run,
    "scale": cmd_scale,
    "report_compare": cmd_report_compare,
    "report_merge": cmd_report_merge,
    "report_render": cmd_report_render,
    "bench_comm": cmd_bench_comm,
    "bench_io": cmd_bench_io,
    "topo": cmd_topo,
    "info": cmd_info,
    "generate": cmd_generate,
    "jobscript": cmd_jobscript,
}


def main(argv: list[str] | None = None) -> int:
    from .launch import MPI_FIX, mpi_missing
    from .stops import handling_interrupts

    args = build_parser().parse_args(argv)
    if args.command in NEEDS_MPI:
        why = mpi_missing()
        if why:  # one line, no traceback: the fix, not the stack
            print(
                f"spmd: error: spmd {args.command} runs under MPI, and no MPI library could be loaded ({why}): "
                f"{MPI_FIX}",
                file=sys.stderr,
                flush=True,
            )
            return 2
    with handling_interrupts():
        return _run(args)


def _run(args) -> int:
    try:
        return COMMANDS[args.command_name](args)
    except KeyboardInterrupt:  # Ctrl-C where no watchdog runs (see spmd.stops)
        return _interrupted()
    except SystemExit as exc:  # user code (a plug-in's class) called sys.exit: not a verified result
        from .workloads.plugins import plugin_frame

        where = plugin_frame(exc) or "spmd"
        code = exc.code if isinstance(exc.code, int) and exc.code not in (0, None) else 1
        return _fail(
            SpmdError(
                f"sys.exit({brief(exc.code)}) was called, which does not end a job: spmd ends it "
                f"as a failure (exit {code})"
            ),
            code,
            collective=False,
            where=where,
        )
    except SpmdError as exc:
        # A collective error has closed the command's Context (and stopped its watchdog) on every rank.
        # report and jobscript run as one plain process: their errors need no rank label.
        return _fail(exc, exc.exit_code, collective=exc.collective or args.command in ("report", "jobscript"))
    except Exception as exc:  # a bug in a plug-in or spmd, or an unexpected library error: name it, end the job
        from .workloads.plugins import plugin_frame

        where = plugin_frame(exc)  # a plug-in's code: say where in it, as map_reduce does
        return _fail(exc, 1, collective=False, trace=traceback.format_exc(), where=where)


def _interrupted() -> int:
    from .launch import mpi_loaded
    from .stops import EXIT_CODE

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
        print(
            f"spmd: error: {one_line(named)}{type(exc).__name__ + ': ' if trace else ''}{one_line(exc)}",
            file=sys.stderr,
            flush=True,
        )
        return code
    from .watchdog import ending

    while ending():  # the watchdog is ending the job (exit 4): this error is its echo
        time.sleep(1.0)
    world = MPI.COMM_WORLD
    if collective:
        if world.Get_rank() == 0:
            label = {0: "stopped", 130: "interrupted"}.get(code, "error")
            print(f"spmd: {label}: {one_line(exc)}", file=sys.stderr, flush=True)
        return code
    where_rank = f"rank {world.Get_rank()} on {MPI.Get_processor_name()}"
    if trace:
        sys.stderr.write("".join(f"[{where_rank}] {line}\n" for line in trace.rstrip().splitlines()))
    named = f"{where}: " if where else ""
    print(
        f"spmd: error: {where_rank}: {one_line(named)}{type(exc).__name__ + ': ' if trace else ''}{one_line(exc)}",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    if world.Get_size() > 1:
        from .watchdog import end_job

        end_job(world, code)  # the other ranks may be inside a collective: end them all
    return code

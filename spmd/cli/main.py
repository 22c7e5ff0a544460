"""The ``spmd`` command's entry point: parse (``arguments``; each command's module declares its flags), run the
command's handler, turn its errors into exit codes.

Failure rule: an error every rank agreed on (``SpmdError.collective``) is printed once by
rank 0 and every rank exits with its code; an error on some ranks only, or any
unexpected exception, is printed by the failing rank as ``rank R on HOST: cause`` and
aborts the whole MPI job, so no rank is ever left waiting.
"""

from __future__ import annotations

import sys
import traceback

from ..core.errors import SpmdError, brief, one_line
from .arguments import build_parser

INTERRUPT_GRACE_S = 2.0  # after Ctrl-C (no watchdog), rank r leaves r times this to the ranks below it
NEEDS_MPI = (
    "run",
    "scale",
    "bench",
    "topo",
    "info",
)  # generate runs alone without MPI; report and jobscript never need it


def main(argv: list[str] | None = None) -> int:
    from ..core.launch import MPI_FIX, mpi_missing
    from ..core.stops import handling_interrupts

    args = build_parser().parse_args(argv)
    if getattr(args, "capture", None) is not None:  # --capture N is the config key it names
        args.override.append(f"capture.steps={args.capture}")
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
        return args.handler(args)
    except KeyboardInterrupt:  # Ctrl-C where no watchdog runs (see spmd.core.stops)
        return _interrupted()
    except SystemExit as exc:  # user code (a plug-in's class) called sys.exit: not a verified result
        from ..workloads.plugins import plugin_frame

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
        # report, jobscript and srun-mpi run as one plain process: their errors need no rank label.
        return _fail(
            exc,
            exc.exit_code,
            collective=exc.collective or args.command in ("report", "predict", "jobscript", "srun-mpi"),
        )
    except Exception as exc:  # a bug in a plug-in or spmd, or an unexpected library error: name it, end the job
        from ..workloads.plugins import plugin_frame

        where = plugin_frame(exc)  # a plug-in's code: say where in it, as map_reduce does
        return _fail(exc, 1, collective=False, trace=traceback.format_exc(), where=where)


def _interrupted() -> int:
    from ..core.launch import mpi_loaded
    from ..core.stops import EXIT_CODE

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
        from ..core.watchdog import end_job

        end_job(world, EXIT_CODE)  # the other ranks may be inside a collective
    return EXIT_CODE


def _fail(exc: BaseException, code: int, collective: bool, trace: str | None = None, where: str | None = None) -> int:
    import time

    from ..core.launch import mpi_loaded

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
    from ..core.watchdog import ending

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
        from ..core.watchdog import end_job

        end_job(world, code)  # the other ranks may be inside a collective: end them all
    return code

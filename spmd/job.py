"""One run of a workload: bind devices, open the communicator, run, verify, report."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import faults
from . import xp as xpmod
from .comm.factory import open_communicator
from .errors import InputError, SpmdError, VerificationError, one_line
from .files import require_replaceable, require_writable_folder, write_json_atomic
from .report.build import build_report
from .progress import Progress
from .timing import PhaseTimer, enter_phase
from .topology import describe_placement
from .watchdog import set_timeout
from .workloads.base import checked_problem
from .workloads.registry import workload_class


@dataclass
class JobResult:
    """What ``run_job`` gives back on every rank.

    Attributes:
        report: the report.json content (rank 0's, on every rank).
        path: where it was written, or None when no output folder was given.
        extra: what ``after_run`` returned on this rank.
    """

    report: dict
    path: Path | None
    extra: Any = None


def run_job(ctx, cfg, out_dir: str | Path | None = None,
            after_run: Callable[[Any, Any], Any] | None = None, progress: Progress | None = None) -> JobResult:
    """Run ``cfg`` (its params resolved: ``workloads.registry``) on every rank of ``ctx``; write
    ``out_dir/report.json`` on rank 0 if given.

    The report is built only after the result is verified (and saved, when the workload's
    ``params.save`` asks), so a failed run leaves none.
    ``after_run(communicator, workload)`` runs collectively after verification, while the
    communicator is still open (``spmd scale`` measures its collectives there). ``progress``: a line after each
    repeat (rank 0's, spmd.progress).
    """
    set_timeout(cfg.timeout_s)
    fault = ctx.agree(faults.fault_from, cfg.fault)
    faults.arm(fault, ctx.rank, ctx.host)
    enter_phase("setup")
    cls = workload_class(cfg.workload)
    ctx.agree(require_outputs, out_dir, cls.output_files(cfg), cfg.overwrite)  # before the work, not after it
    ctx.bind_device(cfg.device, cfg.allow_shared_gpu)
    comm = open_communicator(ctx, cfg.comm)
    workload = cls()
    try:
        workload.setup(ctx, cfg, comm)
        timer = PhaseTimer(ctx.xp)
        warmup, repeats = workload.schedule(cfg.warmup, cfg.repeats)
        for i in range(warmup + repeats):
            workload.prepare()
            # every rank starts the repeat together: untimed preparation that takes longer on one rank (poisoning
            # a buffer while another rank does the same) would otherwise show as the others' wait
            xpmod.synchronize(ctx.xp)
            ctx.comm.Barrier()
            timer.start_repeat()
            workload.run(timer)
            times = timer.end_repeat(record=i >= warmup)
            if progress is not None and progress.enabled:
                progress.repeat(i, warmup, repeats, workload.progress_note(times["total"]))
        enter_phase("verify")
        verification = verify(ctx, workload) if cfg.verify != "none" else NOT_CHECKED
        workload.save()  # only a verified result is written (or one its plug-in's config says not to check)
        extra = after_run(comm, workload) if after_run else None
        enter_phase("report")
        ctx.agree(faults.require_fired)
        records = ctx.comm.gather(timer.records, root=0)
        engines = ctx.comm.gather(workload.input_engines(), root=0)
        nodes = ctx.layout()
        placement = describe_placement(ctx)  # rank 0: hosts, ranks per node, links (spmd report merge reads it)
        if placement is not None:
            ctx.warnings += oversubscribed(placement)
        path = Path(out_dir) / "report.json" if out_dir is not None else None

        def build():
            report = build_report(cfg=cfg, ctx=ctx, comm_name=comm.name, records_by_rank=records,
                                  verified=verification is not NOT_CHECKED,
                                  nodes=nodes, verification=verification, result=workload.result(),
                                  metrics_fn=workload.metrics, placement=placement, engines=engines,
                                  problem=checked_problem(workload.problem(), type(workload).__qualname__))
            if path is not None:
                write_json_atomic(path, report)
            return report

        report = ctx.agree(build, root_only=True)
    except SpmdError as exc:
        if exc.collective:  # every rank is here: safe to release collective resources
            _release(workload, comm)
        raise
    # Any other exception skips the release: peers may be stuck in a collective, and the
    # CLI aborts the whole job anyway.
    _release(workload, comm)
    faults.disarm()
    enter_phase("done", timed=False)  # between runs (a sweep's ranks wait here): no phase to time
    return JobResult(report, path, extra)


NOT_CHECKED = {"reference": "none: the config says verify: none (a plug-in); the result was not checked"}


_FIX = "remove it or choose another path"


def require_outputs(out_dir, files: list[str], overwrite: bool = False) -> None:
    """Refuse, on this rank, a report folder or a folder of the workload's output files that it cannot write,
    a report.json spmd did not write, and an output file (a save, a checkpoint) spmd did not write unless the
    config says ``overwrite: true``."""
    if out_dir is not None:
        require_writable_folder(out_dir, "output folder")
        require_replaceable(Path(out_dir) / "report.json", "the report", fix=_FIX)
    for path in files:
        require_writable_folder(Path(path).parent, f"the folder of {path}:")
        require_replaceable(path, "the output", overwrite, fix=_FIX + ", or set overwrite: true to replace it")


def oversubscribed(placement: dict) -> list[str]:
    """Warnings for the hosts that ran more ranks than they have CPUs (their timings measure contention)."""
    return [f"oversubscribed: {host} ran {placement['ranks_per_node'][host]} ranks on {placement['cpus_per_node'][host]}"
            f" CPU(s): they compete for cores, so the timings measure contention, not the work"
            for host in placement["oversubscribed"]]


def _release(workload, comm) -> None:
    """Close the workload and communicator; a close that fails after a failed set-up (a workload that never
    made what it closes) is reported, not allowed to hide the error that ended the job."""
    try:
        workload.close()
    except Exception as exc:  # noqa: BLE001 - the job is ending on another error, or this one is reported
        print(f"spmd: warning: {type(workload).__name__}.close() failed: {type(exc).__name__}: {one_line(exc)}",
              file=sys.stderr, flush=True)
    comm.close()


def verify(ctx, workload) -> dict:
    """The workload's verification; when it fails on every rank, each rank reads its input again,
    so a rank whose rows hold NaN or infinity is named with the rows (bad data, not bad compute)."""
    try:
        return workload.verify()
    except VerificationError as exc:
        if not exc.collective:
            raise
        try:
            ctx.agree(workload.check_input_finite)
        except InputError as found:  # agreed: every rank is here
            err = VerificationError(f"{exc}; the cause, found by reading the input again: {found}")
            err.collective = True
            raise err from None
        raise

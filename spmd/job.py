"""One run of a workload: bind devices, open the communicator, run, verify, report."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
from mpi4py import MPI

from .comm.factory import open_communicator
from .core import faults
from .core import xp as xpmod
from .core.annotate import nvtx_ranges
from .core.clock import agree_clock
from .core.errors import InputError, SpmdError, VerificationError, one_line
from .core.files import json_text, require_replaceable, require_writable_folder, write_files_atomic
from .core.host import HostLoad, gpu_bus_id, host_record, rank_host_facts
from .core.progress import Progress
from .core.stats import BOUND, MIN_REPEATS_95, median_interval
from .core.timing import PhaseTimer, enter_phase
from .core.topology import MORE_CPUS, describe_placement
from .core.watchdog import set_timeout
from .report.build import TIMELINE_REPEATS, build_report
from .report.capture.component import Capture, trace_paths
from .report.html import run_html
from .report.trace import chrome_trace, rank_devices
from .workloads.base import RUN_REPEATS, checked_problem
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


def run_job(
    ctx,
    cfg,
    out_dir: str | Path | None = None,
    after_run: Callable[[Any, Any], Any] | None = None,
    progress: Progress | None = None,
    trace: str | Path | None = None,
    nvtx: bool = False,
) -> JobResult:
    """Run ``cfg`` (its params resolved: ``workloads.registry``) on every rank of ``ctx``; write
    ``out_dir/report.json`` and ``out_dir/report.html`` on rank 0 if given, and the Chrome trace to ``trace``.

    The report is built only after the result is verified (and saved, when the workload's
    ``params.save`` asks), so a failed run leaves none.
    ``after_run(communicator, workload)`` runs collectively after verification, while the
    communicator is still open (``spmd scale`` measures its collectives there). ``progress``: a line after each
    repeat (rank 0's, spmd.core.progress). ``nvtx``: NVTX ranges for every phase (on anyway under a profiler).
    """
    set_timeout(cfg.timeout_s)
    wall = WallClock()  # where the run's own wall time went, part by part (report.json ``wall``)
    fault = ctx.agree(faults.fault_from, cfg.fault)
    faults.arm(fault, ctx.rank, ctx.host)
    enter_phase("setup")
    cls = workload_class(cfg.workload)
    cfg = ctx.agree(cls.resolve_repeats, cfg, RUN_REPEATS)
    # before the work, not after it
    captures = trace_paths(out_dir, ctx.size) if cfg.capture.steps else []
    ctx.agree(require_job_outputs, out_dir, cls.output_files(cfg), cfg.overwrite, trace, captures)
    ranges, nvtx_state = ctx.agree(nvtx_ranges, nvtx)
    ctx.bind_device(cfg.device, cfg.allow_shared_gpu)
    ctx.agree(cls.load_libraries, cfg)
    comm = open_communicator(ctx, cfg.comm)
    workload = cls()
    try:
        workload.setup(ctx, cfg, comm)
        timer = PhaseTimer(ctx.xp, ranges)
        clock = agree_clock(ctx.comm)
        warmup, repeats = workload.schedule(cfg.warmup, MIN_REPEATS_95 if cfg.repeats == "auto" else cfg.repeats)
        plan = RepeatPlan(ctx, warmup, repeats, cfg.repeats == "auto", cfg.max_seconds)
        # the CPU time of this rank and of its node's CPUs over the repeats, and the processes on its GPU
        load = HostLoad(gpu_bus_id(ctx.device_id) if ctx.device == "gpu" else None)
        load.start()
        wall.mark("setup")
        i = 0
        while plan.wants(i):
            if i == warmup:
                wall.mark("warmup")
            workload.prepare()
            # every rank starts the repeat together: untimed preparation that takes longer on one rank (poisoning
            # a buffer while another rank does the same) would otherwise show as the others' wait
            xpmod.synchronize(ctx.xp)
            ctx.comm.Barrier()
            timer.start_repeat(warmup=i < warmup)
            workload.run(timer)
            times = timer.end_repeat(record=i >= warmup)
            plan.done(i, times["total"])
            if progress is not None and progress.enabled:
                progress.repeat(i, warmup, None if plan.auto else repeats, workload.progress_note(times["total"]))
            i += 1
        load.stop()
        wall.mark("repeats")
        enter_phase("capture")
        capture = Capture(cfg.capture, ctx.device == "gpu", ctx.rank) if cfg.capture.steps else None
        if capture is not None:
            capture.run(workload)
        wall.mark("capture")
        enter_phase("verify")
        verification = verify(ctx, workload) if cfg.verify != "none" else NOT_CHECKED
        workload.save()  # only a verified result is written (or one its plug-in's config says not to check)
        wall.mark("verify")
        wall.move(timer.excluded, "verify")  # the steps checked inside the repeats, untimed, are verification's
        wall.move({"setup": verification.get("setup_seconds", 0.0)}, "verify")  # and its part of the set-up
        extra = after_run(comm, workload) if after_run else None
        wall.mark("calibration")
        enter_phase("report")
        ctx.agree(faults.require_fired)
        records = ctx.comm.gather(timer.records, root=0)
        warmups = ctx.comm.gather(timer.warmup_records, root=0)
        keep = len(timer.timeline) if trace is not None else TIMELINE_REPEATS  # the trace has every repeat
        timelines = ctx.comm.gather(
            [
                {"index": k, "warmup": rep.warmup, "start": clock.shared(rep.start), "spans": rep.spans}
                for k, rep in enumerate(timer.timeline)
            ][-keep:],
            root=0,
        )
        engines = ctx.comm.gather(workload.input_engines(), root=0)
        mine = capture.result(spans=trace is not None) if capture is not None else None
        if mine and mine.drawn:  # the captured steps as one more repeat of the trace, on the shared clock
            started, spans = mine.drawn
            mine = mine._replace(
                drawn={"index": "captured", "warmup": False, "start": clock.shared(started), "spans": spans}
            )
        captured = ctx.comm.gather(mine, root=0)
        nodes = ctx.layout()
        host_facts = ctx.comm.gather(rank_host_facts(ctx.threads, load.sample, ctx.device), root=0)
        placement = describe_placement(ctx)  # rank 0: hosts, ranks per node, links (spmd report merge reads it)
        host = None
        if placement is not None:
            host = host_record(host_facts, ctx.hosts)
            ctx.warnings += oversubscribed(placement) + single_cpu(placement) + host["busy"]
        path = Path(out_dir) / "report.json" if out_dir is not None else None

        def build():
            parts = wall.parts()
            checked = verification
            if verification is not NOT_CHECKED:  # what checking cost, as a share of the run's wall time
                checked = {**verification, "share_of_wall": parts["verify"] / max(sum(parts.values()), 1e-12)}
            report = build_report(
                cfg=cfg,
                ctx=ctx,
                comm_name=comm.name,
                records_by_rank=records,
                verified=verification is not NOT_CHECKED,
                nodes=nodes,
                verification=checked,
                result=workload.result(),
                metrics_fn=workload.metrics,
                placement=placement,
                engines=engines,
                problem=checked_problem(workload.problem(), type(workload).__qualname__),
                warmups_by_rank=warmups,
                timelines=timelines,
                clock=clock.to_dict(),
                repeat_rule=plan.rule(),
                nvtx=nvtx_state,
                kernels=[c.analysis if c else None for c in captured] if any(captured) else None,
                host=host,
                wall=parts,
            )
            files = []
            for target, c in zip(captures, captured):
                if c and c.trace is not None:
                    Path(target).parent.mkdir(parents=True, exist_ok=True)
                    files.append((Path(target), c.trace, 0o666))
            if trace is not None:
                drawn = [list(reps) + ([c.drawn] if c and c.drawn else []) for reps, c in zip(timelines, captured)]
                files.append((Path(trace), json_text(run_trace(report, drawn)).encode(), 0o666))
            if path is not None:
                files += [
                    (path.with_name("report.html"), run_html(report).encode(), 0o666),
                    (path, json_text(report).encode(), 0o666),
                ]
            write_files_atomic(files)  # all of them, or (a full disk) none
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


class WallClock:
    """Seconds of a run's wall time by part: ``mark(name)`` ends the part begun at the previous mark."""

    def __init__(self):
        self.last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self.last
        self.last = now

    def move(self, seconds: dict[str, float], to: str) -> None:
        """Count ``seconds`` of some parts (part -> seconds) as ``to``'s: untimed work done inside them."""
        for name, value in seconds.items():
            if value > 0 and name in self.seconds:
                self.seconds[name] -= value
                self.seconds[to] = self.seconds.get(to, 0.0) + value

    def parts(self) -> dict[str, float]:
        """The parts so far, and what passed since the last mark as ``report`` (gathering, writing)."""
        return {**self.seconds, "report": time.perf_counter() - self.last}


NOT_CHECKED = {"reference": "none: the config says verify: none (a plug-in); the result was not checked"}
AUTO_FLOOR = 3  # repeats: auto stops at its budget only with at least this many repeats
AUTO_MAX_REPEATS = 10_000


class RepeatPlan:
    """How many repeats to run: ``warmup`` then ``repeats`` (fixed), or under ``repeats: auto`` as many as it
    takes for the 95% interval of the median repeat (the slowest rank's total) to lie within +-BOUND of it, until
    ``max_seconds`` of repeats have passed. Every rank decides alike: each repeat's slowest total and the time
    spent are agreed by an allreduce (max) after it."""

    def __init__(self, ctx, warmup: int, repeats: int, auto: bool, max_seconds: float):
        self.ctx, self.warmup, self.repeats, self.auto, self.max_seconds = ctx, warmup, repeats, auto, max_seconds
        self.totals: list[float] = []
        self.first: float | None = None
        self.stopped: str | None = None

    def wants(self, index: int) -> bool:
        if index < self.warmup:
            return True
        if not self.auto:
            return index < self.warmup + self.repeats
        return self.stopped is None

    def done(self, index: int, total: float) -> None:
        if index < self.warmup or not self.auto:
            return
        now = time.perf_counter()
        if self.first is None:
            self.first = now - total
        agreed = np.array([total, now - self.first])
        self.ctx.comm.Allreduce(MPI.IN_PLACE, agreed, op=MPI.MAX)
        slowest, spent = float(agreed[0]), float(agreed[1])
        self.totals.append(slowest)
        n = len(self.totals)
        if n >= MIN_REPEATS_95 and median_interval(self.totals).tight(BOUND):
            self.stopped = "tight"
        elif spent >= self.max_seconds and n >= AUTO_FLOOR:
            self.stopped = "budget"
        elif n >= AUTO_MAX_REPEATS:
            self.stopped = "limit"

    def rule(self) -> dict:
        """report.json's ``repeat_rule``."""
        if not self.auto:
            return {"rule": "fixed", "repeats": self.repeats, "bound": BOUND}
        return {
            "rule": "auto",
            "bound": BOUND,
            "max_seconds": self.max_seconds,
            "min_repeats": MIN_REPEATS_95,
            "stopped": self.stopped,
            "repeats": len(self.totals),
        }


def run_trace(report: dict, timelines: list) -> dict:
    """The Chrome trace of a run (spmd.report.trace) from its report and every rank's repeats."""
    by_rank = rank_devices(report)
    devices = [by_rank.get(r) for r in range(report["ranks"])]
    meta = {
        "workload": report["workload"],
        "ranks": report["ranks"],
        "device": report["device"],
        "comm": report["comm"],
        "repeats": report["repeats"],
        "warmup": report["warmup"],
        "created": report["created"],
    }
    return chrome_trace(
        timelines,
        [r["host"] for r in report["per_rank"]],
        devices,
        report["timeline"]["clock"],
        report["problem"],
        meta,
    )


_FIX = "remove it or choose another path"


def require_job_outputs(out_dir, files: list[str], overwrite: bool = False, trace=None, captures=()) -> None:
    """Refuse, on this rank, a report folder or a folder of the workload's output files that it cannot write,
    a report.json or report.html spmd did not write, a trace path holding another's file, and an output file (a
    save, a checkpoint) spmd did not write unless the config says ``overwrite: true``."""
    if out_dir is not None:
        require_writable_folder(out_dir, "output folder")
        require_replaceable(Path(out_dir) / "report.json", "the report", fix=_FIX)
        require_replaceable(Path(out_dir) / "report.html", "the report", fix=_FIX)
    if trace is not None:
        require_writable_folder(Path(trace).parent, f"the folder of {trace}:")
        require_replaceable(trace, "the trace", fix=_FIX)
    for path in captures:
        require_replaceable(path, "a captured trace", fix=_FIX)
    for path in files:
        require_writable_folder(Path(path).parent, f"the folder of {path}:")
        require_replaceable(path, "the output", overwrite, fix=_FIX + ", or set overwrite: true to replace it")


def oversubscribed(placement: dict) -> list[str]:
    """Warnings for the hosts that ran more ranks than they have CPUs (their timings measure contention)."""
    return [
        f"oversubscribed: {host} ran {placement['ranks_per_node'][host]} ranks on {placement['cpus_per_node'][host]}"
        f" CPU(s): they compete for cores, so the timings measure contention, not the work"
        for host in placement["oversubscribed"]
    ]


def single_cpu(placement: dict) -> list[str]:
    """A warning when GPU ranks ran bound to one CPU each while their nodes had CPUs to spare."""
    ranks = placement.get("single_cpu_gpu_ranks") or []
    if not ranks:
        return []
    spare = max(r.get("node_cpus", 0) for r in placement["ranks"] if r["rank"] in ranks)
    return [
        f"one CPU per GPU rank: rank(s) {', '.join(map(str, ranks))} ran bound to a single CPU by the launcher while"
        f" the node let the job use {spare}: each rank's host thread, which launches every kernel, shared it with"
        " NCCL's proxy thread and spmd's watchdog, so a launch-bound step (small batches, eager PyTorch) measures"
        f" that contention. Give each rank several CPUs: {MORE_CPUS}"
    ]


def _release(workload, comm) -> None:
    """Close the workload and communicator; a close that fails after a failed set-up (a workload that never
    made what it closes) is reported, not allowed to hide the error that ended the job."""
    try:
        workload.close()
    except Exception as exc:  # noqa: BLE001 - the job is ending on another error, or this one is reported
        print(
            f"spmd: warning: {type(workload).__name__}.close() failed: {type(exc).__name__}: {one_line(exc)}",
            file=sys.stderr,
            flush=True,
        )
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

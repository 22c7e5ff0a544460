"""``spmd scale``: one workload on groups of 1, 2, 4, ... ranks of one launch, then the analysis.

Each size gets a sub-communicator of the first n ranks (so every rank keeps its node-local
rank and GPU); the other ranks wait in a sleeping barrier. Every size is a full
``run_job``: bound, verified, timed. A failure in any size fails the sweep on every rank. What the runs can share
is made once: every rank enters the workload's ``sweep_session`` before the first run (its libraries, GPU context
and model loaded at once; torch's groups joined once), and NCCL communicators stay open from run to run of the same
ranks (``comm.factory.kept_communicators``).

With ``--capture`` (config ``capture``) no timed step runs after a capture: every size is timed first with
nothing captured, then a capture pass runs each size's job again, briefly and unchecked (one repeat, ``verify:
none``), capturing its steps at the end, and its captured steps join the timed run's report (``with_capture``).
A profiler once started leaves later steps in the same process slower, so a sweep that captured at the end of
each size timed its later sizes after captures.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

from mpi4py import MPI

from ...comm.factory import kept_communicators
from ...core import xp as xpmod
from ...core.config import int_list
from ...core.cpus import threads_of_a_rank_of
from ...core.errors import ConfigError, SpmdError, one_line
from ...core.files import require_replaceable
from ...core.launch import mpi_library
from ...core.progress import Progress
from ...core.runtime import Context
from ...core.units import fmt_seconds
from ...io.generate import plan_inputs, write_inputs
from ...io.weak import copies_note
from ...job import run_job
from ...report.build import with_capture
from ...workloads.registry import workload_class
from ..decision.history import history_advice
from ..models.series import series_figures, time_interval
from .analysis import analyse, sweep_cost
from .calibrate import compare_backends, probe_collectives, read_limit


@dataclass(frozen=True)
class Point:
    """One point of the sweep, not an optimizer step. It is one run: a series (strong, weak, batch, or share: one
    rank holding a rank's share of the strong problem at ``share_of`` ranks), a rank count and the config it runs."""

    mode: str
    ranks: int
    cfg: object
    share_of: int | None = None


def default_ranks(world: int) -> list[int]:
    """1, 2, 4, ... below ``world``, plus ``world``."""
    sizes, n = [], 1
    while n < world:
        sizes.append(n)
        n *= 2
    return sizes + [world]


def parse_ranks(text: str | None, world: int) -> list[int]:
    """``--ranks 1,2,4`` -> [1, 2, 4], checked against the launch size."""
    if not text:
        return default_ranks(world)
    sizes = int_list(text, "--ranks", "sizes")
    if sizes[-1] > world:
        raise ConfigError(
            f"--ranks {text!r}: sizes must be between 1 and the {world} ranks launched (start more with mpiexec -n)"
        )
    return sizes


def run_scale(
    ctx,
    cfg,
    ranks: list[int],
    modes: list[str],
    probe_max_bytes: int,
    progress: bool = True,
    compare_comm: bool = True,
    live: Progress | None = None,
    batches: list[int] | None = None,
    trace_dir: str | None = None,
    nvtx: bool = False,
    shares: list[int] | None = None,
) -> dict | None:
    """Generate inputs, run every size of every series, analyse; the scaling dict on rank 0. ``shares``: rank counts
    whose one rank's share of the strong problem also runs on one rank (``plan_shares``). ``progress``: a
    line per size on stdout as it ends; ``live`` (spmd.core.progress, rank 0's stderr): each size as it starts and
    each of its repeats. ``batches``: the batch sweep too (each per-rank batch on 1 and on the most ranks).
    ``trace_dir``: a Chrome trace of each run there (``trace_name``); ``nvtx``: NVTX ranges. Where the config
    gives no ``repeats``, each size repeats until its timing is tight (``repeats: auto``)."""
    began = time.perf_counter()
    cfg = ctx.agree(workload_class(cfg.workload).resolve_repeats, cfg, "auto")
    points = ctx.agree(plan, cfg, modes, ranks) + ctx.agree(plan_batches, cfg, batches or [], ranks)
    points += ctx.agree(plan_shares, cfg, shares or [], ranks)
    if trace_dir is not None:
        ctx.agree(require_traces, trace_dir, points, root_only=True)
    written, notes = generate_inputs(ctx, points)
    inputs_s = time.perf_counter() - began
    if ctx.rank == 0 and progress:
        for note in notes:
            print(f"spmd scale: {note}", flush=True)
        if written:
            print(f"spmd scale: generated {len(written)} input file(s)", flush=True)
    first: dict[str, dict] = {}  # each series' first report: the base of its figures

    def report_progress(run):
        report = run["report"]
        if run["mode"] in (SHARE_MODE, BATCH_MODE):  # no series' point: what it ran and how fast
            if progress:
                what = (
                    f"share of {run['share_of']} ranks on 1 rank: "
                    f"{fmt_seconds(time_interval(report).median).strip()} per repeat"
                    if run["mode"] == SHARE_MODE
                    else f"batch {report['result'].get('batch_per_rank')} per rank, {run['ranks']} rank(s): "
                    f"{report['metrics'].get('samples_per_s', 0):,.0f} samples/s"
                )
                print(f"spmd scale: {what}, verified" + wall_words(report), flush=True)
            return
        base = first.setdefault(run["mode"], run["report"])
        row = series_figures(run["mode"], [base] if base is run["report"] else [base, run["report"]])[-1]
        if progress:
            print(
                f"spmd scale: {run['mode']:<6} {run['ranks']:>4} rank(s): {fmt_seconds(row['time']):>10} "
                f"per repeat, speedup {row['speedup']:.2f}x, efficiency {row['efficiency']:.0%}, verified"
                + wall_words(run["report"]),
                flush=True,
            )

    warming = time.perf_counter()
    session = workload_class(cfg.workload).sweep_session(ctx, cfg, sorted({point.ranks for point in points}))
    with kept_communicators(), session:
        ctx.comm.Barrier()  # every rank warmed: the first run's set-up waits for none
        warm_s = time.perf_counter() - warming
        runs = run_points(
            ctx,
            points,
            probe_max_bytes,
            on_done=report_progress,
            compare_comm=compare_comm,
            live=live,
            trace_dir=trace_dir,
            nvtx=nvtx,
        )
    if ctx.rank != 0:
        return None
    cost = sweep_cost(runs, {"inputs": inputs_s, "warm_start": warm_s}, time.perf_counter() - began)
    scaling = analyse(cfg, runs, world_size=ctx.size, mpi_library=mpi_library(), cost=cost)
    # only one launch's runs have a history, in the order they ran (spmd report merge's jobs were launches apart)
    scaling["advice"] += history_advice(runs)
    return scaling


def wall_words(report: dict) -> str:
    """'; 12.3 s in all (set-up 4.1 s, ...)': where a run's wall time went, for its progress line."""
    wall = report.get("wall") or {}
    if not wall:
        return ""
    parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in wall.items() if seconds >= 0.05)
    return f"; {sum(wall.values()):.1f} s in all" + (f" ({parts})" if parts else "")


def plan(cfg, modes: list[str], ranks: list[int]) -> list[Point]:
    """The runs of a sweep; weak configs grow the problem by n / smallest n."""
    cls = workload_class(cfg.workload)
    return [Point(mode, n, cls.scaled_config(cfg, mode, Fraction(n, ranks[0]))) for mode in modes for n in ranks]


BATCH_MODE = "batch"


def parse_batches(text: str | None) -> list[int]:
    """``--batches 16,32,64`` -> [16, 32, 64]."""
    return int_list(text, "--batches", "batches") if text else []


def plan_batches(cfg, batches: list[int], ranks: list[int]) -> list[Point]:
    """The batch sweep's runs: each per-rank batch on one rank and on the most ranks."""
    if not batches:
        return []
    if not hasattr(cfg.params, "batch"):
        raise ConfigError(f"--batches: workload {cfg.workload} has no params.batch (torch and train have)")
    if ranks[-1] < 2:
        raise ConfigError("--batches compares one rank with more: launch at least 2 ranks")
    return [
        Point(BATCH_MODE, n, replace(cfg, params=replace(cfg.params, batch=b))) for b in batches for n in (1, ranks[-1])
    ]


SHARE_MODE = "share"


def parse_shares(text: str | None, ranks: list[int]) -> list[int]:
    """``--shares 2,4`` -> [2, 4]: rank counts above the sweep's own."""
    if not text:
        return []
    shares = int_list(text, "--shares", "rank counts")
    low = [n for n in shares if n <= ranks[-1]]
    if low:
        raise ConfigError(
            f"--shares {text!r}: {low[0]} ranks run in the sweep itself (--ranks up to {ranks[-1]}): give rank counts "
            f"above it, the ones this launch cannot run"
        )
    return shares


def plan_shares(cfg, shares: list[int], ranks: list[int]) -> list[Point]:
    """One rank holding what each rank of a strong run at each of ``shares`` ranks holds (the workload's
    ``share_config``): the local work of rank counts the launch cannot run, measured for the model, which spmd
    predict then carries to them with the target's links."""
    cls = workload_class(cfg.workload)
    return [Point(SHARE_MODE, 1, read_as_a_rank_of(cls.share_config(cfg, Fraction(n, ranks[0])), n), share_of=n)
            for n in shares]  # fmt: skip


def read_as_a_rank_of(cfg, ranks: int):
    """``cfg`` reading with the threads a rank of ``ranks`` on this node gets (its block of the node's CPUs,
    ``io.threads`` set to that count): a share reading with the whole node's threads read faster than the ranks it
    stands for (docs/validation.md, the seventh round)."""
    threads = threads_of_a_rank_of(cfg.io.threads, ranks)
    return replace(cfg, io=replace(cfg.io, threads=threads))


def generate_inputs(ctx, points: list[Point], force: bool = False) -> tuple[list[str], list[str]]:
    """Generate what every size's config describes: missing files and spmd's own out-of-date ones (all of them
    checked, the space included, before any is written). The user's own files are never written: a strong
    run reads them as they are, a weak run copies of them (spmd.io.weak). Returns, on every rank, the files
    written by any rank and what to tell the user."""
    written, notes, seen, users = [], [], set(), set()
    for point in points:
        cls = workload_class(point.cfg.workload)
        sections = (point.cfg.generate, *(g for _, g in cls.extra_inputs(point.cfg)))
        key = (point.cfg.input, sections)
        if key in seen or not any(sections):
            continue  # done for an earlier size, or nothing to generate
        seen.add(key)
        plan = ctx.agree(plan_inputs, point.cfg, cls, force, True, root_only=True)
        notes += [
            f"{one_line(path)} is your file (not written by spmd generate): read as it is; the config's "
            f"generate section does not apply to it"
            for path in plan.users
            if path not in users
        ]
        users.update(plan.users)
        copies = copies_note(point.cfg)
        if copies:
            notes.append(copies)
        mine = ctx.agree(write_inputs, plan, cls, ctx.rank, ctx.size)
        written += [path for part in ctx.comm.allgather(mine) for path in part]
    return written, notes


def trace_name(point: Point) -> str:
    """The trace file of one run of a sweep: ``strong-4.json``, ``batch-64-2.json``, ``share-of-8-1.json``."""
    batch = f"-{point.cfg.params.batch}" if point.mode == BATCH_MODE else ""
    share = f"-of-{point.share_of}" if point.share_of else ""
    return f"{point.mode}{batch}{share}-{point.ranks}.json"


def require_traces(trace_dir: str, points: list[Point]) -> None:
    """Refuse, before the sweep, a trace path that holds a file spmd did not write."""
    for point in points:
        require_replaceable(Path(trace_dir) / trace_name(point), "the trace", fix="remove it or choose another --trace")


def run_points(
    ctx,
    points: list[Point],
    probe_max_bytes: int,
    on_done=None,
    compare_comm: bool = True,
    live: Progress | None = None,
    trace_dir: str | None = None,
    nvtx: bool = False,
) -> list[dict] | None:
    """Run every point; returns on rank 0 the runs [{mode, ranks, report, placement, probe, backends}].

    A weak run whose config equals the strong run of the same size reuses that run.
    ``on_done(run)`` is called on rank 0 after each size (progress lines).
    """
    capturing = [point.cfg.capture.steps > 0 for point in points]
    timed_points = [uncaptured(point) if c else point for point, c in zip(points, capturing)]
    runs: list[dict] = []
    done: dict[tuple, dict] = {}
    # every run's ranks get the compute threads of the largest run's share of their node (spmd.core.host); a share
    # of N stands for a rank of N on this node, so the sweep's runs compute with what such a rank gets, as its reads do
    largest = ctx.hosts[: max(point.ranks for point in points)].count(ctx.host)
    thread_ranks = max(largest, *(point.share_of or 1 for point in points))
    keys = [(point.ranks, json.dumps(point.cfg.to_dict(), sort_keys=True)) for point in points]  # a plug-in's: a dict
    calibrated: set[int] = set()  # the group sizes calibrated so far
    for point, timed, key in zip(points, timed_points, keys):
        if key in done:
            run = done[key] and {**done[key], "mode": point.mode}  # None on ranks outside the group
        else:
            if live is not None:
                live.begin(
                    f"spmd scale: {point.mode} {point.ranks} rank(s)",
                    f"starting (size {len(done) + 1} of {len(set(keys))})",
                )
            trace = Path(trace_dir) / trace_name(point) if trace_dir is not None else None
            # a batch or share run's calibration would measure the links and the disk of a size a series run
            # measured already (and the analysis keeps a series run's): calibrated once per group size
            measure = point.mode not in (BATCH_MODE, SHARE_MODE) or point.ranks not in calibrated
            calibrated.add(point.ranks)
            run = run_point(ctx, timed, probe_max_bytes, compare_comm, live, trace, nvtx, thread_ranks, measure)
            done[key] = run
        if run and point.share_of:
            run = {**run, "share_of": point.share_of}
        if ctx.rank == 0:
            runs.append(run)
            if on_done:
                on_done(run)
    if any(capturing):
        timed_until = time.time()
        captured = capture_pass(ctx, points, capturing, keys, live, thread_ranks)
        if ctx.rank == 0:
            joined: dict[tuple, dict] = {}  # one report a job: a weak run reusing its strong twin keeps sharing it
            for run, key in zip(runs, keys):
                if key in captured:
                    c = captured[key]
                    if key not in joined:
                        joined[key] = with_capture(run["report"], c["kernels"], sum(c["wall"].values()))
                    run["report"] = joined[key]
                    run["capture_pass"] = {
                        "timed_runs_ended": timed_until,
                        "began": c["began"],
                        "ended": c["ended"],
                        "wall": c["wall"],  # the pass run's own parts (report.json ``wall``)
                    }
    return runs if ctx.rank == 0 else None


def uncaptured(point: Point) -> Point:
    """The point as timed: its job with nothing captured (config ``capture``, what ``--capture`` sets)."""
    return replace(point, cfg=replace(point.cfg, capture=replace(point.cfg.capture, steps=0)))


def capture_pass(ctx, points: list[Point], capturing: list[bool], keys: list[tuple], live, thread_ranks) -> dict:
    """After every timed run: each capturing job once more, one repeat, unchecked, its steps captured at its end.
    On rank 0 {job key: {'kernels' (its report's), 'wall' (its run's parts), 'began', 'ended' (epoch s)}}. Its run
    is the workload's ``brief_config``: its repeat only warms the captured steps."""
    out: dict[tuple, dict] = {}
    for point, c, key in zip(points, capturing, keys):
        if not c or key in out:
            continue
        if live is not None:
            live.begin(f"spmd scale: capture {point.mode} {point.ranks} rank(s)", "capturing after the timed runs")
        began = time.time()
        cls = workload_class(point.cfg.workload)
        cfg = replace(cls.brief_config(point.cfg), warmup=0, repeats=1, verify="none")  # its repeat warms the steps
        run = run_point(ctx, replace(point, cfg=cfg), 0, live=live, thread_ranks=thread_ranks, measure=False)
        out[key] = run and {
            "kernels": run["report"]["kernels"],
            "wall": run["report"].get("wall") or {},
            "began": began,
            "ended": time.time(),
        }
    return out if ctx.rank == 0 else {}


def run_point(
    ctx,
    point: Point,
    probe_max_bytes: int,
    compare_comm: bool = True,
    live: Progress | None = None,
    trace: Path | None = None,
    nvtx: bool = False,
    thread_ranks: int | None = None,
    measure: bool = True,
) -> dict | None:
    """Run one size on the first ``point.ranks`` ranks while the others wait; agree on failure. ``thread_ranks``:
    the ranks whose share of the node each rank's compute threads are (default: the group's on the node).
    ``measure``: its collectives probed, the backends compared and the read ceiling measured after it."""
    began = time.perf_counter()
    member = ctx.rank < point.ranks
    group = ctx.comm.Split(0 if member else MPI.UNDEFINED, key=ctx.rank)
    run, failure = None, None
    if member:
        sub = Context(group)
        sub.thread_ranks = thread_ranks
        group.Free()
        joined = time.perf_counter()
        try:
            with sub:
                job = run_job(
                    sub,
                    point.cfg,
                    after_run=(
                        lambda comm, wl: (
                            probe_collectives(sub, comm, wl, probe_max_bytes),
                            compare_backends(sub, comm, wl) if compare_comm else None,
                            read_limit(sub, wl, point.cfg.io),
                        )
                    )
                    if measure
                    else None,
                    progress=live,
                    trace=trace,
                    nvtx=nvtx,
                )
            ended = time.perf_counter()
            run = {"mode": point.mode, "ranks": point.ranks, "report": job.report, "placement": job.report["placement"]}
            extra = job.extra or (None, None, None)
            run.update(probe=extra[0], backends=extra[1], read_limit=extra[2])
        except SpmdError as exc:
            if not exc.collective:
                raise
            failure = exc  # the group agreed on it: the world learns it below, with the size named
        xpmod.release_memory()
    ctx.idle_barrier(timed=member)  # a rank outside this run may wait longer than any one collective
    if run is not None:  # rank 0's time outside the job's own parts: the group made, the job closed, the others
        run["outside_s"] = {
            "group": joined - began,
            "close": ended - joined - sum(run["report"].get("wall", {}).values()),
            "after": time.perf_counter() - ended,
        }

    def check():
        if failure is not None:
            err = type(failure)(f"{point.mode} scaling at {point.ranks} rank(s): {failure}")
            err.collective = True
            raise err

    ctx.agree(check)
    return run

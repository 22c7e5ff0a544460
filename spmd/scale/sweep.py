"""Run one workload on groups of 1, 2, 4, ... ranks of one launch.

Each size gets a sub-communicator of the first n ranks (so every rank keeps its node-local
rank and GPU); the other ranks wait in a sleeping barrier. Every size is a full
``run_job``: bound, verified, timed. A failure in any size fails the sweep on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from mpi4py import MPI

from .. import xp as xpmod
from ..bench.collectives import COLLECTIVES, measure, probe_sizes
from ..bench.comm import ALL_BACKENDS
from ..comm import open_communicator
from ..errors import BackendUnavailable, ConfigError, SpmdError, VerificationError
from ..io.generate import generate
from ..job import run_job
from ..runtime import Context
from ..workloads import workload_class

MODES = ("strong", "weak")


@dataclass(frozen=True)
class Step:
    """One run of the sweep: a series (strong/weak), a rank count, the config it runs."""

    mode: str
    ranks: int
    cfg: object


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
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(f"--ranks {text!r}: expected comma-separated integers, e.g. 1,2,4") from None
    if not sizes or sizes[0] < 1 or sizes[-1] > world:
        raise ConfigError(f"--ranks {text!r}: sizes must be between 1 and the {world} ranks launched "
                          f"(start more with mpiexec -n)")
    return sizes


def plan(cfg, modes: list[str], ranks: list[int]) -> list[Step]:
    """The runs of a sweep; weak configs grow the problem by n / smallest n."""
    cls = workload_class(cfg.workload)
    steps = []
    for mode in modes:
        for n in ranks:
            factor = Fraction(n, ranks[0])
            step_cfg = cls.strong_config(cfg, factor) if mode == "strong" else cls.weak_config(cfg, factor)
            steps.append(Step(mode, n, step_cfg))
    return steps


def prepare_inputs(ctx, steps: list[Step], force: bool = False) -> list[str]:
    """Generate (skipping up-to-date files) the inputs of every config that has a generate section."""
    written, seen = [], set()
    for step in steps:
        key = (step.cfg.input, step.cfg.generate)
        if step.cfg.generate is None or key in seen:
            continue
        seen.add(key)
        written += ctx.agree(generate, step.cfg, ctx.rank, ctx.size, force)
    return written


def run_steps(ctx, steps: list[Step], probe_max_bytes: int, on_done=None,
              compare_comm: bool = True) -> list[dict] | None:
    """Run every step; returns on rank 0 the runs [{mode, ranks, report, placement, probe, backends}].

    A weak run whose config equals the strong run of the same size reuses that run.
    ``on_done(run)`` is called on rank 0 after each size (progress lines).
    """
    runs: list[dict] = []
    done: dict[tuple, dict] = {}
    for step in steps:
        key = (step.ranks, step.cfg)
        if key in done:
            run = done[key] and {**done[key], "mode": step.mode}  # None on ranks outside the group
        else:
            run = run_step(ctx, step, probe_max_bytes, compare_comm)
            done[key] = run
        if ctx.rank == 0:
            runs.append(run)
            if on_done:
                on_done(run)
    return runs if ctx.rank == 0 else None


def run_step(ctx, step: Step, probe_max_bytes: int, compare_comm: bool = True) -> dict | None:
    """Run one size on the first ``step.ranks`` ranks while the others wait; agree on failure."""
    member = ctx.rank < step.ranks
    group = ctx.comm.Split(0 if member else MPI.UNDEFINED, key=ctx.rank)
    run, failure = None, None
    if member:
        sub = Context(group)
        group.Free()
        try:
            job = run_job(sub, step.cfg, after_run=lambda comm, wl: (
                probe(sub, comm, wl, probe_max_bytes), compare_backends(sub, comm, wl) if compare_comm else None))
            run = {"mode": step.mode, "ranks": step.ranks, "report": job.report, "placement": job.report["placement"],
                   "probe": job.extra[0], "backends": job.extra[1]}
        except SpmdError as exc:
            if not exc.collective:
                raise
            failure = exc
        sub.close()
        xpmod.release_memory()
    ctx.idle_barrier(timed=member)  # a rank outside this run may wait longer than any one collective

    def check():
        if failure is not None:
            err = type(failure)(f"{step.mode} scaling at {step.ranks} rank(s): {failure}")
            err.collective = True
            raise err

    ctx.agree(check)
    return run


def probe(ctx, comm, workload, max_bytes: int) -> list[dict]:
    """Time the workload's collectives on this group at sizes 8 B .. ``max_bytes`` per rank,
    so the model's bandwidth is identified even when the workload's messages are tiny."""
    ops = sorted({item["op"] for item in workload.problem().get("comm", [])})
    if comm.size < 2 or max_bytes <= 0:
        return []
    return [{"op": op, "ranks": comm.size, "bytes": m, "seconds": checked_seconds(ctx, comm, op, m, "comm probe")}
            for op in ops for m in probe_sizes(max_bytes)]


def checked_seconds(ctx, comm, op: str, nbytes: int, what: str) -> float:
    """Seconds per call of ``op`` with ``nbytes`` per rank on ``comm``; a wrong result fails the sweep."""
    r = measure(comm, ctx.xp, op, COLLECTIVES[op].size(comm.size, nbytes))
    if r["wrong"]:  # summed over ranks: every rank raises together
        raise ctx.collective_error(VerificationError, 0, f"{what}: {op} with {nbytes} bytes per rank "
                                   f"gave {r['wrong']} wrong element(s)")
    return r["seconds"]


def compare_backends(ctx, comm, workload) -> dict | None:
    """Time this run's own collectives (its ops, at its message sizes, its calls per repeat)
    on every communicator that can run here, so the advice can name the fastest.

    Each op is timed on this group (SUMMA's row and column broadcasts too: an approximation).
    Returns {'ranks', 'ops', 'seconds': {backend: per repeat}, 'skipped': {backend: why}},
    or None on the CPU (only host MPI exists there) and on one rank.
    """
    ops = workload.problem().get("comm", [])
    if comm.size < 2 or not ops or ctx.device != "gpu":
        return None
    seconds, skipped = {}, {}
    for name in ALL_BACKENDS:  # on a GPU every one may run; the CPU has only mpi
        try:
            other = comm if name == comm.name else open_communicator(ctx, name)
        except BackendUnavailable as exc:
            skipped[name] = str(exc)
            continue
        try:
            seconds[name] = sum(item.get("calls", 1) * checked_seconds(ctx, other, item["op"], item["bytes"],
                                                                       f"comm comparison over {name}") for item in ops)
        finally:
            if other is not comm:
                other.close()
    return {"ranks": comm.size, "ops": [{k: o[k] for k in ("op", "bytes", "calls") if k in o} for o in ops],
            "seconds": seconds, "skipped": skipped}

"""What binding a node's CPU ranks does to the slowest of them: the ninth held-out CPU round's reduce, matmul and
stencil (its cases that read arrays) at the run's ranks of one node (``--ranks``, 4 or more), strong, unbound as the
held-out CPU rounds ran (each rank may run on every CPU of the node, its threads moved by the OS) against each rank
bound to CPUs of its own (``bench/programs/bound.py``: as many as spmd gives it threads, the node's CPUs over its
ranks), a fresh launch each, by turns, which goes first alternating from run to run. A step waits for its slowest rank:
the slowest rank's read against the median rank's is what the held-out rounds' 8-rank predictions missed
(docs/validation.md, the ninth CPU round)."""

from __future__ import annotations

import itertools
import os
import statistics

from ..env import CaseFailed
from ..records import Measure
from . import Case, heldoutcpu9
from .heldout import job_config
from .torch_workload import _launched


def _figures(case: str, subject: str, report: dict) -> list[Measure]:
    """One launch's measures: the slowest rank's read, it against the median rank's, the time a repeat."""
    reads = [p["median"]["read"] for p in report["per_rank"]]
    kept = {"bound_cpus": [r.get("bound_cpus") for r in report["placement"]["ranks"]], "reads_s": reads}
    return [
        Measure(case, subject, max(reads) / statistics.median(reads), "slowest rank's read / median rank's", "x",
                better="lower", params=kept),
        Measure(case, subject, max(reads) * 1e3, "slowest rank's read", "ms", better="lower"),
        Measure(case, subject, report["timings"]["total"]["median"] * 1e3, "time a repeat", "ms", better="lower"),
    ]  # fmt: skip


def cpus_a_rank(ranks: int) -> int:
    """The CPUs each of ``ranks`` ranks gets of those this machine lets the job use (spmd's threads a rank alike)."""
    return len(os.sched_getaffinity(0)) // ranks


def jobs(env) -> dict:
    """name -> job: the ninth CPU round's cases that read arrays (its MLP's steps read batches as they train)."""
    return {name: job for name, (job, _) in heldoutcpu9.cases_list(env).items() if job["workload"] != "train"}


def unbound_against_bound(env, runs: int, name: str) -> list[list[Measure]]:
    """Per run, one launch of the job ``name`` unbound and one bound, in alternating order (``_launched``)."""
    ranks = env.ranks
    cores = cpus_a_rank(ranks)
    if cores < 1:
        raise CaseFailed(
            f"binding: {ranks} ranks need a CPU each; this machine lets the job use {len(os.sched_getaffinity(0))}"
        )
    cfg, _ = job_config(env, "binding", name, jobs(env)[name], ("strong",))
    case = f"{name}, strong, {ranks} CPU ranks of a node"
    folders = (env.work / f"binding-{k}" for k in itertools.count())

    def unbound():
        folder = next(folders)
        env.spmd("run", cfg, "--out", folder, "-q", ranks=ranks)
        return _figures(case, "unbound (as the held-out CPU rounds ran)", env.report(folder))

    def bound():
        folder = next(folders)
        env.program("bound.py", cores, "-m", "spmd", "run", cfg, "--out", folder, "-q", ranks=ranks)
        return _figures(case, f"bound to {cores} CPU(s) of its own a rank", env.report(folder))

    return _launched(runs, [unbound, bound])


def cases(env) -> list[Case]:
    return [
        Case(
            f"unbound against bound, {name.split(',')[0]} at {env.ranks} CPU ranks",
            lambda e, runs, name=name: unbound_against_bound(e, runs, name),
            needs=("ranks4",),
            batched=True,
        )
        for name in jobs(env)
    ]

"""The sweep's calibration: what ``spmd scale`` measures on each group beside the workload, after its run.

Three probes: the workload's collectives at sizes up to ``--probe-max-bytes`` (the model's bandwidth), the same
collectives at the workload's own sizes on every GPU backend (which communicator to use), and each rank's reads
as plain preads (the read limit). report.json's ``wall.calibration`` is their time."""

from __future__ import annotations

from ...comm.factory import open_communicator
from ...core.config import COMM_BACKENDS
from ...core.cpus import reader_threads
from ...core.errors import BackendUnavailable, VerificationError
from ...measure.collectives import COLLECTIVES, measure, probe_sizes
from ...measure.io import pread_limit

STOP_AT = 10  # a communicator this many times the fastest's repeat is timed no further (compare_backends)


def probe_collectives(ctx, comm, workload, max_bytes: int) -> list[dict]:
    """Time the workload's collectives on this group at sizes 8 B .. ``max_bytes`` per rank,
    so the model's bandwidth is identified even when the workload's messages are tiny."""
    ops = sorted({item["op"] for item in workload.problem().get("comm", [])})
    if comm.size < 2 or max_bytes <= 0:
        return []
    return [
        {"op": op, "ranks": comm.size, "bytes": m, "seconds": checked_seconds(ctx, comm, op, m, "comm probe")}
        for op in ops
        for m in probe_sizes(max_bytes)
    ]


def read_limit(ctx, workload, io_cfg) -> list | None:
    """Each rank preads the bytes it read in the run (the page cache as the run left it), on the reader's
    threads: the limit under its read phase. Rank 0 gets [{"bytes", "seconds"} or None, per rank]; None for a
    workload that does not read through spmd.InputRows."""
    plan = getattr(getattr(workload, "rows", None), "plan", None)
    if plan is None:
        return None
    threads = reader_threads(io_cfg.threads, ctx.local_size, ctx.local_rank)
    seconds = ctx.agree(pread_limit, plan, threads, io_cfg.buffer_mb)
    return ctx.comm.gather({"bytes": plan.nbytes, "seconds": seconds} if seconds else None, root=0)


def checked_seconds(ctx, comm, op: str, nbytes: int, what: str) -> float:
    """Seconds per call of ``op`` with ``nbytes`` per rank on ``comm``; a wrong result fails the sweep."""
    r = measure(comm, ctx.xp, op, COLLECTIVES[op].size(comm.size, nbytes))
    if r["wrong"]:  # summed over ranks: every rank raises together
        raise ctx.collective_error(
            VerificationError, 0, f"{what}: {op} with {nbytes} bytes per rank gave {r['wrong']} wrong element(s)"
        )
    return r["seconds"]


def compare_backends(ctx, comm, workload) -> dict | None:
    """Time this run's own collectives (its ops, at its message sizes, its calls per repeat)
    on every communicator that can run here, so the advice can name the fastest.

    Each op is timed on this group (SUMMA's row and column broadcasts too: an approximation), once for each
    distinct op and size (a model's equal gradient buckets are timed once and counted for each). The run's own
    communicator goes first; another one stops once its ops so far take STOP_AT x the fastest's whole repeat
    (host-staged MPI moving a large model's gradients would take seconds a call): its seconds are then what it
    took up to there, a bound below its repeat, and ``stopped`` names it with how many ops it ran.
    Returns 'ranks', 'ops', 'seconds' (per repeat, by backend), 'stopped' (the ops timed, by backend) and 'skipped'
    (why, by backend), or None on the CPU (only host MPI exists there) and on one rank.
    """
    ops = workload.problem().get("comm", [])
    if comm.size < 2 or not ops or ctx.device != "gpu":
        return None
    seconds, stopped, skipped = {}, {}, {}
    for name in sorted(COMM_BACKENDS, key=lambda n: n != comm.name):  # on a GPU every one may run; the CPU: mpi
        try:
            other = comm if name == comm.name else open_communicator(ctx, name)
        except BackendUnavailable as exc:
            skipped[name] = str(exc)
            continue
        fastest = min(seconds.values(), default=None)
        timed: dict[tuple, float] = {}  # (op, bytes) -> seconds a call
        try:
            total = 0.0
            for done, item in enumerate(ops, 1):
                key = (item["op"], item["bytes"])
                if key not in timed:
                    timed[key] = checked_seconds(ctx, other, *key, f"comm comparison over {name}")
                total += item.get("calls", 1) * timed[key]
                # the same on every rank: checked_seconds is the slowest rank's
                if fastest is not None and total > STOP_AT * fastest and done < len(ops):
                    stopped[name] = done
                    break
            seconds[name] = total
        finally:
            if other is not comm:
                other.close()
    return {
        "ranks": comm.size,
        "ops": [{k: o[k] for k in ("op", "bytes", "calls") if k in o} for o in ops],
        "seconds": seconds,
        "stopped": stopped,
        "skipped": skipped,
    }

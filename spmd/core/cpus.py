"""How many reader threads a rank's ``direct`` reads use, and on which CPUs (config ``io.threads``).

A ``pread`` from the page cache is a CPU copy, so a read goes as fast as the CPUs its threads run on. Launchers often
bind each rank to one core (Open MPI's mpirun does for 2 ranks or fewer): the reader threads then share that core, and
read several times slower than the node's cores could. ``io.threads: auto`` (the default) gives the readers the rank's
share of the node: the CPUs this job may use (its cgroup's cpuset, else the online CPUs) cut into one contiguous block
per rank on the node. Where the launcher bound the rank to fewer CPUs than that, outside a SLURM job step (whose tasks
have the CPUs the allocation gave them), the reader threads alone run on the share and the rank's own CPUs (the main
thread keeps its binding); report.json ``io`` says so. Several unbound ranks on a node (``mpirun --bind-to none``) each
keep their reader threads on their own share too: left where the kernel puts them, every rank's threads spread over
every CPU, and an unbound sweep's reads slow as ranks are added (docs/scaling.md). An integer ``io.threads`` keeps the
threads within the rank's binding (or, unbound, its share), at most that many.

The choice is the process's, made once at set-up like its GPU: ``reader_threads`` decides and records the CPUs;
each reader thread of ``direct.read_pieces`` moves itself onto them (``pin_reader_thread``).
"""

from __future__ import annotations

import os
from pathlib import Path

_reader_cpus: frozenset[int] | None = None  # where reader threads run; None: where the rank is bound


def parse_cpu_list(text: str) -> frozenset[int]:
    """'0-3,8,10-11' (the kernel's CPU list format) -> {0, 1, 2, 3, 8, 10, 11}."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def node_cpus() -> frozenset[int]:
    """The CPUs this job may use on the node: its cgroup's cpuset (v2, or v1's cpuset controller) within the
    online CPUs, else the online ones."""
    online = _read_cpu_list(Path("/sys/devices/system/cpu/online")) or frozenset(range(os.cpu_count() or 1))
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return online
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy
            cpuset = _read_cpu_list(Path("/sys/fs/cgroup") / path.lstrip("/") / "cpuset.cpus.effective")
        elif "cpuset" in controllers.split(","):
            cpuset = _read_cpu_list(Path("/sys/fs/cgroup/cpuset") / path.lstrip("/") / "cpuset.effective_cpus")
        else:
            continue
        if cpuset & online:
            return cpuset & online
    return online


def _read_cpu_list(path: Path) -> frozenset[int]:
    try:
        return parse_cpu_list(path.read_text())
    except (OSError, ValueError):
        return frozenset()


def node_share(cpus: frozenset[int], local_rank: int, local_size: int) -> frozenset[int]:
    """Rank ``local_rank``'s block of ``cpus`` cut into ``local_size`` contiguous blocks (at least one CPU)."""
    ordered = sorted(cpus)
    size = max(1, local_size)
    lo, hi = local_rank * len(ordered) // size, (local_rank + 1) * len(ordered) // size
    return frozenset(ordered[lo:hi] or ordered[local_rank % len(ordered) : local_rank % len(ordered) + 1])


def bound_cpus() -> frozenset[int]:
    """The CPUs this process may run on now (its affinity, which a launcher or SLURM may narrow)."""
    if hasattr(os, "sched_getaffinity"):
        return frozenset(os.sched_getaffinity(0))
    return frozenset(range(os.cpu_count() or 1))


def reader_threads(wanted: int | str, local_ranks: int = 1, local_rank: int = 0) -> int:
    """The reader threads of this rank for ``io.threads`` (``wanted``), their CPUs recorded for the threads."""
    global _reader_cpus
    threads, _reader_cpus = _readers(wanted, local_ranks, local_rank)
    return threads


def threads_of_a_rank_of(wanted: int | str, local_ranks: int) -> int:
    """The reader threads ``io.threads`` (``wanted``) gives a rank where ``local_ranks`` ranks share this node: what a
    one-rank share of that many reads with (``spmd scale --shares``); this process's readers stay where they are."""
    return _readers(wanted, local_ranks, 0)[0]


def _readers(wanted: int | str, local_ranks: int, local_rank: int) -> tuple[int, frozenset[int] | None]:
    """(reader threads, the CPUs they move onto or None) of rank ``local_rank`` of ``local_ranks`` on this node."""
    node, bound = node_cpus(), bound_cpus()
    share = node_share(node, local_rank, local_ranks)
    unbound = bound >= node
    own = len(share) if unbound else len(bound)  # the CPUs the rank has without moving its readers
    cpus = None
    if unbound and local_ranks > 1 and not in_slurm_step():
        # several unbound ranks on the node: each rank's readers on its own block, not wherever the kernel puts
        # them (all ranks' threads on every CPU), so the ranks' reads do not take each other's cores
        cpus = share
    if wanted != "auto":
        return max(1, min(int(wanted), own)), cpus
    if unbound or len(bound) >= len(share) or in_slurm_step():
        return max(1, own), cpus
    return len(share), share | bound


def in_slurm_step() -> bool:
    """Inside a SLURM job step (srun, or mpirun through it) a task's CPUs are what the allocation gave it."""
    return "SLURM_STEP_ID" in os.environ or "SLURM_CPUS_PER_TASK" in os.environ


def reader_cpus() -> frozenset[int] | None:
    """The CPUs reader threads move onto (None: they stay where the rank is bound)."""
    return _reader_cpus


def pin_reader_thread() -> None:
    """Move the calling reader thread onto the recorded CPUs (a thread's own affinity; the rank's stays)."""
    if _reader_cpus is not None and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, _reader_cpus)
        except OSError:  # a cpuset that changed under us: read where the rank is bound
            pass

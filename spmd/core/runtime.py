"""The SPMD context: MPI communicator, rank layout, device binding, array module.

One rank drives one GPU, chosen by *node-local* rank (never global rank), and two ranks
on one physical GPU are refused unless ``allow_shared_gpu`` is set.

A Context is used as a context manager: it is closed (communicators freed, its watchdog stopped,
both collective) when the block ends normally or on an error every rank agreed on, and left open
on an error of some ranks only, which ends the job by MPI_Abort (closing would wait for the
others in a collective they never reach).
"""

from __future__ import annotations

import os
import time
import traceback

import numpy as np
from mpi4py import MPI

from . import waits
from . import xp as xpmod
from .errors import BackendUnavailable, SpmdError, error_class
from .host import ThreadChoice, apply_threads, choose_threads
from .launch import check_launch
from .watchdog import start as start_watchdog
from .watchdog import stop as stop_watchdog
from .watched import watched

MPI_OPS = {"sum": MPI.SUM, "min": MPI.MIN, "max": MPI.MAX}


class Context:
    """Everything a rank needs to know about the job it is part of.

    Attributes:
        comm: private duplicate of COMM_WORLD (spmd's messages never mix with the user's).
        rank, size: this rank and the job size.
        host: this rank's hostname; hosts: every rank's hostname, by rank.
        node_comm: ranks sharing this node's memory; local_rank/local_size within it.
        device: 'gpu' or 'cpu' once bound; device_id: the CUDA device index or None.
        shared_gpu: some GPU of the job serves several ranks (only with allow_shared_gpu).
        xp: cupy or numpy, matching ``device``.
        warnings: what the job should know about its launch (printed by the CLI, kept in the report).
    """

    def __init__(self, comm: MPI.Comm | None = None, watchdog: bool = False):
        if comm is None:  # the whole launch: refuse srun tasks that MPI did not connect
            check_launch(MPI.COMM_WORLD.Get_size())
        self.comm = watched((comm or MPI.COMM_WORLD).Dup())
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        # SPMD_HOST: the node a rank counts as (hosts emulated on one machine, as NCCL_HOSTID tells NCCL)
        self.host = os.environ.get("SPMD_HOST") or MPI.Get_processor_name()
        self.hosts = self.comm.allgather(self.host)
        # One watchdog per process, over the whole launch (the CLI asks for it; see spmd.core.watchdog)
        self.owns_watchdog = (
            watchdog and comm is None and waits.installed() is None and os.environ.get("SPMD_WATCHDOG", "on") != "off"
        )
        if self.owns_watchdog:
            start_watchdog(MPI.COMM_WORLD, self.hosts)
        self.node_comm = watched(self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank))
        self.local_rank = self.node_comm.Get_rank()
        self.local_size = self.node_comm.Get_size()
        self.device = "cpu"
        self.device_id: int | None = None
        self.device_name = "cpu"
        self.shared_gpu = False  # True when some GPU serves several ranks (allow_shared_gpu)
        self.node_gpus = 0  # the distinct GPUs this node's ranks drive (bind_device)
        self.xp = np
        # a CPU rank's compute threads (spmd.core.host); a sweep sets thread_ranks, the most ranks it runs on
        # this node, so that every run's ranks get the same threads
        self.threads: ThreadChoice | None = None
        self.thread_ranks: int | None = None
        self.warnings: list[str] = []

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None or (isinstance(exc, SpmdError) and exc.collective):
            self.close()
        return False

    # -- agreement: the no-hang rule for everything a rank can check --------------------

    def agree(self, fn, *args, root_only: bool = False, **kwargs):
        """Run ``fn`` (on every rank, or rank 0 alone) and agree on the outcome.

        If ``fn`` raises SpmdError on any rank, every rank raises the same error, naming the
        first failing rank and its host, marked ``collective`` so ranks exit cleanly
        instead of hanging in the next collective. An error that was already collective
        (agreed inside a sub-communicator) keeps its message, which names its rank. Any other
        exception (a bug) is printed on its rank and agreed as an SpmdError "internal error".

        Returns:
            What ``fn`` returned on this rank (rank 0's value on every rank when ``root_only``).
        """
        value, failure = None, None
        if not root_only or self.rank == 0:
            try:
                value = fn(*args, **kwargs)
            except SpmdError as exc:
                failure = (type(exc).__name__, str(exc), exc.collective)
            except Exception as exc:  # a bug on one rank must not leave the others waiting below
                traceback.print_exc()
                failure = ("SpmdError", f"internal error: {type(exc).__name__}: {exc}", False)
        if root_only:
            value, failure = self.comm.bcast((value, failure), root=0)
            failures = [failure]
        else:
            failures = self.comm.allgather(failure)
        failed = [r for r, f in enumerate(failures) if f]
        if failed:
            first = failed[0]
            name, message, named = failures[first]
            if named:
                err = error_class(name)(message)
                err.collective = True
                raise err
            if len(failed) == self.size > 1:
                message += f" (all {self.size} ranks failed)"
            elif len(failed) > 1:
                message += f" (ranks {', '.join(map(str, failed[1:]))} failed too)"
            raise self.collective_error(error_class(name), first, message)
        return value

    def collective_error(self, cls: type[SpmdError], rank: int, message: str) -> SpmdError:
        """An error every rank raises together, naming ``rank`` and its host."""
        err = cls(f"rank {rank} on {self.hosts[rank]}: {message}")
        err.collective = True
        return err

    # -- device binding ------------------------------------------------------------------

    def bind_device(
        self, requested: str, allow_shared_gpu: bool = False, otherwise: str = "set allow_shared_gpu: true"
    ) -> None:
        """Choose CPU or GPU for every rank and bind this rank's GPU by node-local rank.

        Raises:
            BackendUnavailable: GPU asked for but absent, ranks disagree, or two ranks
                would share one GPU without ``allow_shared_gpu`` (the message offers ``otherwise``).
        """
        device = self.agree(_choose_device, requested)
        devices = self.comm.allgather(device)
        if len(set(devices)) > 1:
            cpu_ranks = [r for r, d in enumerate(devices) if d == "cpu"]
            raise self.collective_error(
                BackendUnavailable,
                cpu_ranks[0],
                f"sees no GPU while other ranks do (CPU ranks: {cpu_ranks}); set device: cpu or gpu",
            )
        if device == "gpu":
            identity = self.agree(self._use_gpu)
            peers = self.node_comm.allgather((self.rank, identity))
            shared = find_shared_devices(peers)
            self.shared_gpu = bool(self.comm.allreduce(bool(shared), op=MPI.LOR))
            if shared and not allow_shared_gpu:
                a, b, dev = shared[0]
                raise self.collective_error(
                    BackendUnavailable,
                    a,
                    f"ranks {a} and {b} both landed on GPU {dev}: start one rank per GPU "
                    f"({self.local_size} ranks on this node) or {otherwise}",
                )
            self.node_gpus = len({i for _, i in peers})
            crowded = self.comm.gather((self.host, self.local_size, self.node_gpus), root=0)
            if self.rank == 0:
                self.warnings += [
                    f"{host}: {ranks} ranks on {gpus} GPU(s): ranks share GPUs, so their timings "
                    f"measure contention, not scaling (start at most one rank per GPU)"
                    for host, ranks, gpus in sorted(set(crowded or []))
                    if ranks > gpus
                ]
        self.device = device
        self.xp = xpmod.array_module(device)
        if device == "cpu":
            self.threads = choose_threads(self.thread_ranks or self.local_size)
            apply_threads(self.threads)

    def planned_gpu(self, requested: str) -> int | None:
        """The GPU ``bind_device(requested)`` would bind this rank to, or None where it would choose the CPU; binds
        nothing and raises nothing (the binding itself checks and says what is wrong)."""
        count = xpmod.gpu_count() if requested != "cpu" else 0
        return self.local_rank % count if count else None

    def _use_gpu(self) -> str:
        count = xpmod.gpu_count()
        self.device_id = self.local_rank % count
        xpmod.cupy.cuda.Device(self.device_id).use()
        self.device_name = xpmod.device_name(self.device_id)
        return xpmod.device_identity(self.device_id)

    # -- layout --------------------------------------------------------------------------

    def layout(self) -> list[dict]:
        """Per node: hostname, its ranks, and the device each rank drives (for the report)."""
        entries = self.comm.allgather((self.rank, self.host, self.local_rank, self.device_id, self.device_name))
        nodes: dict[str, dict] = {}
        for rank, host, local_rank, dev_id, dev_name in entries:
            node = nodes.setdefault(host, {"host": host, "ranks": [], "devices": []})
            node["ranks"].append(rank)
            node["devices"].append({"rank": rank, "local_rank": local_rank, "device_id": dev_id, "name": dev_name})
        return list(nodes.values())

    def idle_barrier(self, poll_s: float = 0.002, timed: bool = True) -> None:
        """A barrier that sleeps while it waits, so idle ranks leave the CPU to busy ones
        (MPI's blocking barrier spins a core per waiting rank). ``timed=False``: the watchdog shows
        the wait but does not time it (ranks outside a sweep's run wait as long as the run takes)."""
        with waits.Waiting("idle barrier", timed):
            request = self.comm.Ibarrier()
            while not request.Test():
                time.sleep(poll_s)

    def allreduce_host(self, *arrays: np.ndarray, op: str = "sum") -> None:
        """Reduce host (NumPy) arrays over every rank, in place: one MPI allreduce each (the
        small sums that verification and statistics need, outside the measured communicator)."""
        for array in arrays:
            self.comm.Allreduce(MPI.IN_PLACE, array, op=MPI_OPS[op])

    def close(self) -> None:
        """Release the MPI communicators this context created (and stop its watchdog); collective.
        Closing a closed context does nothing."""
        if self.owns_watchdog:
            stop_watchdog()
            self.owns_watchdog = False
        for comm in (self.node_comm, self.comm):
            if comm != MPI.COMM_NULL:
                comm.Free()


def _choose_device(requested: str) -> str:
    if requested == "cpu":
        return "cpu"
    count = xpmod.gpu_count()
    if count > 0:
        return "gpu"
    if requested == "gpu":
        why = "CuPy is not installed" if xpmod.cupy is None else "CuPy sees no CUDA device"
        raise BackendUnavailable(f"device: gpu requested but {why}")
    return "cpu"


def find_shared_devices(peers: list[tuple[int, str]]) -> list[tuple[int, int, str]]:
    """Pairs of ranks bound to the same physical device.

    Args:
        peers: (global rank, device identity) of every rank on one node.

    Returns:
        (first rank, other rank, device identity) for each rank that shares a device with
        a lower rank, in rank order.
    """
    first_owner: dict[str, int] = {}
    shared = []
    for rank, identity in sorted(peers):
        if identity in first_owner:
            shared.append((first_owner[identity], rank, identity))
        else:
            first_owner[identity] = rank
    return shared

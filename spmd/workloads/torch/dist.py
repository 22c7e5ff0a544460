"""torch.distributed started from spmd's MPI communicator: no torchrun, no environment to set.

Rank 0 opens a TCPStore on a port the system picks and broadcasts its address over MPI; every rank joins
the default process group with the MPI rank and size (NCCL on GPUs, gloo on CPUs), torn down at the job's end
(``close``). A sweep joins once instead (``sweep_groups``): the default group over every rank of the launch and a
group of the first n ranks for each size n, which each of its runs uses (``join``, ``group``) and leaves open.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket

from ...core.errors import BackendUnavailable, ConfigError
from ...core.libraries import loaded_libraries

INSTALL = "pip install 'spmd[torch]' (PyTorch, the CPU wheel or a CUDA build)"


def import_torch():
    """``torch``, or ConfigError saying how to install it (exit 2)."""
    try:
        import torch
    except ImportError as exc:
        raise ConfigError(f"workload: torch needs PyTorch, which cannot be imported here ({exc}): {INSTALL}") from None
    return torch


def store_address(ctx) -> str:
    """The address other ranks reach rank 0 at: loopback when every rank is on rank 0's host."""
    if all(host == ctx.hosts[0] for host in ctx.hosts):
        return "127.0.0.1"
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return socket.gethostname()


def start(ctx, device: str, timeout_s: float, graph: bool = False, device_id: int | None = None):
    """Join every rank of ``ctx`` into torch.distributed's default group (on a GPU, ``device_id`` or the one ``ctx``
    bound); returns the backend's name."""
    torch = import_torch()
    dist = torch.distributed
    if not dist.is_available():
        raise BackendUnavailable("this PyTorch build has no torch.distributed")
    backend = "nccl" if device == "gpu" else "gloo"
    if device == "gpu":
        torch.cuda.set_device(ctx.device_id if device_id is None else device_id)
        if graph:  # a captured allreduce cannot be watched by the error-handling thread
            os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
    if dist.is_initialized():  # an earlier run of this process that ended without closing
        dist.destroy_process_group()
    timeout = datetime.timedelta(seconds=timeout_s)
    opened = {}

    def open_store() -> tuple[str, int]:  # rank 0: the server, on a port the system picks; its address for all
        address = store_address(ctx)
        opened["store"] = dist.TCPStore(address, 0, ctx.size, True, timeout, wait_for_workers=False)
        return address, opened["store"].port

    address, port = ctx.agree(open_store, root_only=True)
    store = ctx.agree(lambda: opened.get("store") or dist.TCPStore(address, port, ctx.size, False, timeout))
    ctx.agree(dist.init_process_group, backend, store=store, rank=ctx.rank, world_size=ctx.size, timeout=timeout)
    return backend


_sweep: dict | None = None  # inside sweep_groups: {"backend", "groups": {rank count: its group, None for all}}
_group = None  # the running job's group inside a sweep (None: the default group)


def join(ctx, device: str, timeout_s: float, graph: bool = False) -> str:
    """The job's ranks joined: inside ``sweep_groups``, the group made there for its size (a sweep's run of n ranks
    runs on the launch's first n: spmd.scale.sweep.run); elsewhere the default group, started (``start``). Returns
    the backend's name."""
    global _group
    if _sweep is None:
        _group = None
        return start(ctx, device, timeout_s, graph)
    if device == "gpu":
        import torch

        torch.cuda.set_device(ctx.device_id)
    _group = _sweep["groups"][ctx.size]
    return _sweep["backend"]


def group():
    """The running job's process group for torch.distributed's calls (None: the default group)."""
    return _group


@contextlib.contextmanager
def sweep_groups(ctx, device_id: int | None, timeout_s: float, sizes: list[int], graph: bool = False):
    """torch.distributed joined once for a sweep, by every rank of ``ctx`` (the launch) at once: the default group
    over them all (on GPU ``device_id``, or the CPU where None) and a group of the first n ranks for each of
    ``sizes``, which each run of that size uses and leaves open; the block's end destroys them. Making and
    destroying an NCCL group took about 0.2 and 0.5 s a run (torch 2.11, NCCL 2.28, two H200s). A block left by an
    exception destroys nothing (a failing job's group may not)."""
    global _sweep, _group
    import torch

    device = "cpu" if device_id is None else "gpu"
    backend = start(ctx, device, timeout_s, graph, device_id)
    groups = {n: None if n == ctx.size else torch.distributed.new_group(list(range(n))) for n in sorted(set(sizes))}
    _sweep = {"backend": backend, "groups": groups}
    try:
        yield
    except BaseException:
        _sweep = _group = None
        raise
    _sweep = _group = None
    torch.distributed.destroy_process_group()


def libraries(torch, gpu: bool) -> dict:
    """What this process's PyTorch runs on: its version and, on a GPU, the NCCL version DDP reports and the NCCL and
    cuBLAS files mapped into the process. A library already loaded under the same name is the one PyTorch gets, so
    these say whether DDP runs on PyTorch's own NCCL and cuBLAS, as in a script of its own (the torch workload
    imports PyTorch before spmd's CuPy communicator loads its NCCL: ``load_libraries``)."""
    out = {"torch": torch.__version__}
    if gpu:
        version = torch.cuda.nccl.version()
        out["nccl_version"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        out["nccl"] = loaded_libraries("libnccl")
        out["cublas"] = loaded_libraries("libcublas")
    return out


def close() -> None:
    """Leave the default group (collective over its ranks); nothing when none was joined, or inside ``sweep_groups``,
    whose end destroys its groups."""
    global _group
    import torch.distributed as dist

    _group = None
    if _sweep is None and dist.is_initialized():
        dist.destroy_process_group()

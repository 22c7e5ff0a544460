"""The same model trained in a plain DDP script written by hand, the baseline of spmd's `ddp` strategy: one
process, or one per rank under mpiexec (the world and a free port for PyTorch's store taken from MPI, one GPU per
node-local rank; one node), rows resident on the device, AdamW (weight decay 0, as spmd's config), 25 MiB buckets,
fp32; windows of ``--steps`` steps timed the way spmd times a repeat (device synchronized at both ends, the slowest
rank's window). Rank 0 prints one JSON line per batch: samples/s of all ranks over the median window, and every
window's seconds (several batches in one launch: a launch with its NCCL set-up costs more than the timed steps).
``--spmd-env`` runs the same loop inside what ``spmd run`` builds around its step: spmd's context with its watchdog
thread, CuPy on the rank's GPU and spmd's own communicator, opened in spmd's order (PyTorch loaded first) and kept
open through the loop: a whole-launch gap that this reproduces is the process's, not spmd's step.

    python bench/programs/plain_ddp.py --size large --batch 256 [--device cpu]
    mpiexec -n 2 python bench/programs/plain_ddp.py --size large --batch 16,64,256 [--spmd-env]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples/torch"))
import mlp  # noqa: E402


def mapped(fragment: str) -> list[str]:
    """The shared objects this process loaded whose path holds ``fragment`` (as spmd.core.libraries does; this script
    imports nothing of spmd's, so that it runs on what PyTorch loads by itself)."""
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if fragment in line and ".so" in line})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="large")
    ap.add_argument("--batch", default="256", help="per-rank batch, or several: 16,64,256")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--spmd-env", action="store_true", help="the loop inside spmd's context, device and communicator")
    a = ap.parse_args()
    with contextlib.ExitStack() as around:
        if a.spmd_env:  # as spmd.job: the context (and its watchdog), the device, then spmd's communicator
            from spmd.comm.factory import open_communicator
            from spmd.core.runtime import Context

            ctx = around.enter_context(Context(watchdog=True))
            ctx.bind_device(a.device)
            around.callback(open_communicator(ctx, "auto").close)
        train(a)


def train(a) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gpu = a.device == "gpu"
    on = "cuda" if gpu else "cpu"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    if gpu:  # one GPU per node-local rank, as spmd binds
        torch.cuda.set_device(node.Get_rank() % torch.cuda.device_count())
        on = f"cuda:{torch.cuda.current_device()}"
    else:  # as spmd gives each rank: its share of the node's cores
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // node.Get_size()))
    store = dist.TCPStore("127.0.0.1", 0, world, True, wait_for_workers=False) if rank == 0 else None
    port = comm.bcast(store.port if store else None)
    if store is None:
        store = dist.TCPStore("127.0.0.1", port, world, False)
    dist.init_process_group("nccl" if gpu else "gloo", store=store, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = mlp.build({"options": {"size": a.size}}).to(on)
    ddp = DDP(model, device_ids=[torch.cuda.current_device()] if gpu else None, bucket_cap_mb=25)
    # spmd's `optimizer: {name: adamw, lr: 1.0e-3}` leaves weight_decay at 0 (PyTorch's AdamW defaults to 0.01)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    x = torch.randn(a.rows, mlp.WIDTHS[a.size][0], device=on)
    y = torch.randint(0, 10, (a.rows,), device=on)
    for batch in [int(b) for b in a.batch.split(",")]:
        times = []
        for w in range(a.windows + 1):  # the first window warms up
            idx = torch.randint(0, a.rows, (a.steps, batch), device=on)
            sync()
            t0 = time.perf_counter()
            for i in range(a.steps):
                opt.zero_grad(set_to_none=True)
                rows = idx[i]
                loss = torch.nn.functional.cross_entropy(ddp(x.index_select(0, rows)), y.index_select(0, rows))
                loss.backward()
                opt.step()
            sync()
            if w:
                times.append(comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
        if rank == 0:
            rate = world * batch * a.steps / statistics.median(times)
            libraries = {"torch": torch.__version__}
            if gpu:
                libraries |= {"nccl": mapped("libnccl"), "cublas": mapped("libcublas")}
            line = {
                "batch": batch,
                "samples_per_s": rate,
                "ranks": world,
                "windows_s": times,
                "libraries": libraries,
                "spmd_env": a.spmd_env,
            }
            print(json.dumps(line), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

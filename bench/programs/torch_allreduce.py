"""PyTorch's allreduce at the sizes of ``spmd bench comm``: the peer spmd's collectives are compared with.

NCCL on GPUs (one per rank, by node-local rank), gloo on CPUs; ranks and the rendezvous from MPI (rank 0's
TCPStore on a port the system picks), so it launches like spmd. Timing as spmd's: warm-up, a barrier, ``iters``
back-to-back calls, synchronize; the slowest rank's average; nccl-tests' bus bandwidth, algbw x 2(n-1)/n. Prints
one JSON object (rank 0): {"backend", "ranks", "results": [{size, time_us, algbw_GBps, busbw_GBps}]}.

    mpiexec -n 2 python bench/programs/torch_allreduce.py --max-bytes 1073741824
"""

from __future__ import annotations

import argparse
import json
import socket
import time

import torch
import torch.distributed as dist
from mpi4py import MPI


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-bytes", type=int, default=8)
    parser.add_argument("--max-bytes", type=int, default=1 << 30)
    parser.add_argument("--factor", type=int, default=2, help="each size is the last times this")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    local = world.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
    gpu = torch.cuda.is_available()
    host = socket.gethostbyname(socket.gethostname()) if rank == 0 else None
    store = dist.TCPStore(host or "127.0.0.1", 0, size, True, wait_for_workers=False) if rank == 0 else None
    host, port = world.bcast((host, store.port if store else None), root=0)
    store = store or dist.TCPStore(host, port, size, False)
    device = torch.device("cuda", local) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if gpu else "gloo", store=store, rank=rank, world_size=size)
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    warm = torch.ones(1 << 18, dtype=torch.float32, device=device)
    for _ in range(200 if gpu else 20):  # a fixed count: every rank makes the same number of calls
        dist.all_reduce(warm)
    sync()
    rows, nbytes = [], args.min_bytes
    while nbytes <= args.max_bytes:
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        dist.barrier()
        sync()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(x)
        sync()
        mine = torch.tensor([(time.perf_counter() - start) / args.iters], dtype=torch.float64, device=device)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        seconds = mine.item()
        algbw = x.numel() * 4 / seconds
        rows.append(
            {
                "size": x.numel() * 4,
                "time_us": seconds * 1e6,
                "algbw_GBps": algbw / 1e9,
                "busbw_GBps": algbw * 2 * (size - 1) / size / 1e9,
            }
        )
        nbytes *= args.factor
    if rank == 0:
        print(json.dumps({"backend": "nccl" if gpu else "gloo", "ranks": size, "results": rows}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

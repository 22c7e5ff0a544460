"""Reference: torch.distributed.all_reduce over NCCL at the sizes of `spmd bench comm`.

A comparison point only (PyTorch is never a dependency of spmd). Launch like spmd, one rank
per GPU, e.g. `mpirun -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29511 python3 bench/torch_allreduce.py`.
Timing as spmd's: warm-up, a barrier, `iters` back-to-back calls, synchronize; the slowest
rank's average. nccl-tests' bus bandwidth: algbw x 2(n-1)/n.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--min-bytes", type=int, default=8)
    parser.add_argument("--max-bytes", type=int, default=1 << 30)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", 0)))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", 1)))
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("LOCAL_RANK", 0)))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", rank=rank, world_size=size, device_id=torch.device("cuda", local))
    warm = torch.ones(1 << 18, dtype=torch.float32, device="cuda")  # as spmd: 1 MiB, ~0.2 s, first
    for _ in range(2000):  # a fixed count: every rank must make the same number of calls
        dist.all_reduce(warm)
    torch.cuda.synchronize()
    rows, nbytes = [], args.min_bytes
    while nbytes <= args.max_bytes:
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device="cuda")
        for _ in range(args.warmup):
            dist.all_reduce(x)
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        mine = torch.tensor([(time.perf_counter() - start) / args.iters], device="cuda", dtype=torch.float64)
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
        if rank == 0:
            print(
                f"{rows[-1]['size']:>12} {rows[-1]['time_us']:>10.2f} {rows[-1]['algbw_GBps']:>8.2f} "
                f"{rows[-1]['busbw_GBps']:>8.2f}",
                flush=True,
            )
        del x
        nbytes *= 2
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "torch": torch.__version__,
                    "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                    "ranks": size,
                    "results": rows,
                },
                f,
                indent=2,
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

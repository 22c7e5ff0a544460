"""PyTorch DDP reference for the train table: the same MLP, per-GPU batch, optimizer (SGD, momentum 0.9), data resident
on the GPU, 25 MB buckets. 1 GPU runs the plain model (what a user runs on one GPU), 2, 4, ... GPUs (up to the launch
size) DistributedDataParallel. One JSON line per run from rank 0.

    mpirun -n 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29512 python bench/programs/train_ddp.py > train-ddp.jsonl
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch import nn

MODELS = {
    "medium": ((844, 256, 128, 64, 10), (16, 32, 64, 128, 1024)),
    "large": ((4812, 1024, 1024, 512, 512, 256, 10), (8, 16, 32, 64, 512)),
}


def mlp(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(nn.Linear(widths[i], widths[i + 1]))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def measure(widths, batch, steps, group, device, rows=16384):
    torch.manual_seed(0)
    model = mlp(widths).to(device)
    if group is not None:  # the first gpus ranks, so a smaller DDP runs inside a larger launch
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index], bucket_cap_mb=25, process_group=group
        )
    x = torch.randn(rows, widths[0], device=device)
    y = torch.randint(0, widths[-1], (rows,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    idx = torch.randint(0, rows, (steps + 20, batch), device=device)

    def step(batch_idx):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[batch_idx]), y[batch_idx])
        loss.backward()
        opt.step()

    return timed(step, idx, steps)


def timed(step, idx, steps: int) -> float:
    """Seconds of ``steps`` calls of ``step(batch indices)`` after 20 untimed warm-up calls (compilation,
    autotuning, cuBLAS handles, NCCL connections); ``idx`` holds steps + 20 rows of indices."""
    for i in range(20):
        step(idx[i])
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        step(idx[20 + i])
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", 0))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", 1))
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", rank))
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=size, device_id=device)
    counts = [1 << k for k in range(size.bit_length()) if 1 << k <= size]
    groups = {gpus: dist.new_group(list(range(gpus))) for gpus in counts if gpus > 1}  # every rank creates each
    for name, (widths, batches) in MODELS.items():
        for batch in batches:
            for gpus in counts:
                seconds = []
                for _ in range(args.repeats):
                    if rank < gpus:
                        seconds.append(measure(widths, batch, args.steps, groups.get(gpus), device))
                    dist.barrier()
                if rank == 0:
                    t = sorted(seconds)[len(seconds) // 2]
                    print(
                        json.dumps(
                            {
                                "model": name,
                                "batch": batch,
                                "gpus": gpus,
                                "variant": "ddp",
                                "samples_per_s": batch * gpus * args.steps / t,
                                "step_ms": t / args.steps * 1e3,
                            }
                        ),
                        flush=True,
                    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Real models nobody in the project wrote, trained by spmd's eager DDP step (workload torch's Trainer as ``spmd
run`` builds it: timing marks on one step in ``phase_every``) and by a plain DDP loop written by hand: the same
model, rows, batch, bf16 autocast and AdamW, in the same processes, windows by turns so the host's drift hits both
alike. GPT-2 124M (transformers, built from its config) on 256-token sequences, ResNet-50 (torchvision on a GPU,
transformers' on a CPU) on 3x64x64 images in 100 classes; ``--small`` takes small configurations of both. One
process, or one per rank under mpiexec (one GPU per node-local rank). Rank 0 prints one JSON line per model: each
side's median microseconds per step (a window's time is the slowest rank's), every window's, and each rank's own
median.

``--plain-only``: the plain loop alone, in a process torchrun started (its environment names the rank and the
world), one JSON line with samples/s of all ranks over the median window: the whole-launch peer of ``spmd run``.

    python bench/programs/model_step_cost.py --device gpu [--models gpt2,resnet50] [--windows 8] [--steps 20]
    mpiexec -n 2 python bench/programs/model_step_cost.py --device gpu
    torchrun --nproc-per-node 2 bench/programs/model_step_cost.py --device gpu --plain-only --models gpt2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[2] / "examples/torch"
sys.path.insert(0, str(EXAMPLES))
SMALL = {
    "gpt2": {"layers": 2, "width": 64, "heads": 2, "vocab": 211, "positions": 32},
    "resnet50": {"classes": 10, "embedding": 8, "widths": [8, 16], "depths": [1, 1], "layer": "basic"},
}
SHAPES = {"gpt2": (256, 8, 512), "resnet50": ((3, 64, 64), 64, 1024)}  # (row, batch, rows); --small: smaller
SMALL_SHAPES = {"gpt2": (32, 4, 256), "resnet50": ((3, 16, 16), 8, 256)}


def model_and_data(torch, name: str, small: bool, gpu: bool, on, seed: int):
    """(module, loss function, rows, targets) of ``name``, built after ``torch.manual_seed(seed)``."""
    import gpt2
    import resnet

    options = SMALL[name] if small else ({} if name == "gpt2" else {"classes": 100})
    row, _, rows = (SMALL_SHAPES if small else SHAPES)[name]
    rng = np.random.default_rng(1)
    torch.manual_seed(seed)
    if name == "gpt2":
        vocab = options.get("vocab", 50257)
        module, loss = gpt2.build({"options": options}), gpt2.loss
        x = rng.integers(0, vocab, (rows, row))
        y = (x * 5 + 3) % vocab
    else:
        module = (
            resnet.torchvision_resnet50({"options": options})
            if gpu and not small
            else resnet.build({"options": options})
        )
        loss = torch.nn.functional.cross_entropy
        x = rng.standard_normal((rows, *row), dtype=np.float32)
        y = rng.integers(0, options["classes"], rows)
    return module.to(on), loss, torch.from_numpy(x).to(on), torch.from_numpy(y).to(on)


def plain_loop(torch, module, loss_fn, x, y, batch: int, idx, device_ids, gpu: bool):
    """A window of the hand-written DDP loop (bf16 autocast, AdamW, 25 MiB buckets)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(module, device_ids=device_ids, bucket_cap_mb=25)
    opt = torch.optim.AdamW(module.parameters(), lr=1e-4)
    rows = torch.from_numpy(idx).to(x.device)

    def window():
        for i in range(len(idx)):
            opt.zero_grad(set_to_none=True)
            r = rows[i]
            with torch.autocast("cuda" if gpu else "cpu", dtype=torch.bfloat16):
                loss = loss_fn(ddp(x.index_select(0, r)), y.index_select(0, r))
            loss.backward()
            opt.step()

    return window


def start_group(torch, rank: int, world: int, gpu: bool, comm=None):
    import torch.distributed as dist

    if comm is None:  # torchrun: its environment
        dist.init_process_group("nccl" if gpu else "gloo")
        return
    store = dist.TCPStore("127.0.0.1", 0, world, True, wait_for_workers=False) if rank == 0 else None
    port = comm.bcast(store.port if store else None)
    if store is None:
        store = dist.TCPStore("127.0.0.1", port, world, False)
    dist.init_process_group("nccl" if gpu else "gloo", store=store, rank=rank, world_size=world)


def plain_only(a) -> None:
    import torch
    import torch.distributed as dist

    gpu = a.device == "gpu"
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if gpu:
        torch.cuda.set_device(local)
    on = torch.device("cuda", local) if gpu else torch.device("cpu")
    start_group(torch, rank, world, gpu)
    for name in a.models.split(","):
        module, loss_fn, x, y = model_and_data(torch, name, a.small, gpu, on, 0)
        batch = (SMALL_SHAPES if a.small else SHAPES)[name][1]
        idx = np.random.default_rng(2 + rank).integers(0, len(x), (a.steps, batch))
        window = plain_loop(torch, module, loss_fn, x, y, batch, idx, [local] if gpu else None, gpu)
        seconds = []
        for w in range(a.windows + 1):
            sync(torch, gpu)
            dist.barrier()
            t0 = time.perf_counter()
            window()
            sync(torch, gpu)
            t = torch.tensor([time.perf_counter() - t0], device=on)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            if w:
                seconds.append(float(t))
        if rank == 0:
            rate = batch * world * a.steps / statistics.median(seconds)
            print(json.dumps({"model": name, "ranks": world, "batch": batch, "samples_per_s": rate}), flush=True)
        del window, module
    dist.destroy_process_group()


def sync(torch, gpu: bool) -> None:
    if gpu:
        torch.cuda.synchronize()


def by_turns(a) -> None:
    import torch
    import torch.distributed as dist
    from mpi4py import MPI

    gpu = a.device == "gpu"
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
    xp = np
    if gpu:
        torch.cuda.set_device(local % torch.cuda.device_count())
        on = torch.device("cuda", torch.cuda.current_device())
        import cupy as xp

        xp.cuda.Device(torch.cuda.current_device()).use()
    else:
        on = torch.device("cpu")
    start_group(torch, rank, world, gpu, comm)
    for name in a.models.split(","):
        line = compare(a, torch, comm, xp, on, name)
        if rank == 0:
            print(json.dumps(line), flush=True)
        if gpu:
            torch.cuda.empty_cache()
    dist.destroy_process_group()


def compare(a, torch, comm, xp, on, name: str) -> dict:
    """Both sides' windows by turns for model ``name``; rank 0's line (None elsewhere)."""
    from mpi4py import MPI

    from spmd.core.timing import PhaseTimer
    from spmd.workloads.torch.params import OptimizerConfig, TorchParams
    from spmd.workloads.torch.step import Batches, Trainer

    gpu, rank = a.device == "gpu", comm.Get_rank()
    batch = (SMALL_SHAPES if a.small else SHAPES)[name][1]
    module, loss_fn, x, y = model_and_data(torch, name, a.small, gpu, on, 0)
    idx = np.random.default_rng(2 + rank).integers(0, len(x), (a.steps, batch))
    plain = plain_loop(torch, module, loss_fn, x, y, batch, idx, [on.index] if gpu else None, gpu)
    mine = model_and_data(torch, name, a.small, gpu, on, 0)[0]
    p = TorchParams(
        model="m.py:build", batch=batch, steps=a.steps, precision="bf16", optimizer=OptimizerConfig(lr=1e-4)
    )
    ctx = types.SimpleNamespace(device=a.device, rank=rank, xp=xp)
    trainer = Trainer(torch, ctx, p, mine, loss_fn, Batches(torch, x, y, "device", on, torch.float32, None), a.steps)

    def spmd_window():
        trainer.load_window(idx)
        timer = PhaseTimer(xp)
        timer.start_repeat()
        trainer.run_window(a.steps, timer)
        timer.end_repeat()

    sides = {"plain DDP loop": plain, "spmd ddp": spmd_window}
    slowest = {side: [] for side in sides}
    own = {side: [] for side in sides}
    for w in range(a.windows + 1):  # the first warms up; the side that goes first alternates
        for side in sides if w % 2 else reversed(list(sides)):
            sync(torch, gpu)
            comm.Barrier()
            t0 = time.perf_counter()
            sides[side]()
            sync(torch, gpu)
            seconds = time.perf_counter() - t0
            if w:
                own[side].append(seconds / a.steps * 1e6)
                slowest[side].append(comm.allreduce(seconds, op=MPI.MAX) / a.steps * 1e6)
    per_rank = comm.gather({side: statistics.median(v) for side, v in own.items()}, root=0)
    return {
        "model": name,
        "ranks": comm.Get_size(),
        "device": a.device,
        "batch": batch,
        "precision": "bf16",
        "parameters": sum(t.numel() for t in mine.parameters()),
        "us_per_step": {side: round(statistics.median(v), 1) for side, v in slowest.items()},
        "windows_us": {side: [round(t, 1) for t in v] for side, v in slowest.items()},
        "per_rank_us": [{side: round(t, 1) for side, t in r.items()} for r in per_rank] if rank == 0 else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "gpu"), default="gpu")
    ap.add_argument("--models", default="gpt2,resnet50")
    ap.add_argument("--small", action="store_true", help="small configurations of both models")
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--plain-only", action="store_true", help="the plain loop alone, under torchrun")
    a = ap.parse_args()
    plain_only(a) if a.plain_only else by_turns(a)


if __name__ == "__main__":
    main()

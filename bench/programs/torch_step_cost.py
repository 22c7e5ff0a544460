"""What spmd's eager DDP step adds to a plain DDP loop, in the same processes, windows interleaved so drift hits all
alike: the same model, data, optimizer and rows through a loop written by hand and through workload torch's Trainer
untimed, timed on one step in 8 and on one step in spmd's default ``phase_every``. One process (a world of one), or
one per rank under mpiexec (one GPU per node-local rank, as spmd binds; each window's time is the slowest rank's);
gloo on a CPU, NCCL on a GPU. ``--size tiny`` is a launch-bound 16-16-10 MLP; ``medium`` and ``large`` are the
example MLPs (examples/torch/mlp.py). ``--cupy-first`` imports CuPy, loads its NCCL and opens spmd's own NCCL
communicator over the ranks before PyTorch is imported, the order ``spmd run`` had before the torch workload
loaded PyTorch first (``Workload.load_libraries``): PyTorch then gets the NCCL CuPy loaded under the same name.
Run with and without it to see what that order costs torch's steps. Rank 0 prints one JSON line per batch: each
arrangement's median microseconds per step and every window's, and the libraries the process ran on.

    python bench/programs/torch_step_cost.py [--device cpu|gpu] [--size tiny] [--batch 32] [--windows 12] [--steps 200]
    mpiexec -n 2 python bench/programs/torch_step_cost.py --device gpu --size large --batch 16,64,256 [--cupy-first]
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
from mpi4py import MPI

# PyTorch (and what imports it: examples/torch/mlp.py) is imported in main, after CuPy where --cupy-first says so
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples/torch"))
ROWS = 4096


def module(torch, size: str, on):
    import mlp

    torch.manual_seed(0)
    if size == "tiny":
        return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)).to(on)
    return mlp.build({"options": {"size": size}}).to(on)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--size", choices=("tiny", "medium", "large"), default="tiny")
    ap.add_argument("--batch", default="32", help="per-rank batch, or several: 16,64,256")
    ap.add_argument("--windows", type=int, default=12)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument(
        "--cupy-first", action="store_true", help="CuPy, its NCCL and spmd's communicator before PyTorch (GPU)"
    )
    a = ap.parse_args()
    gpu = a.device == "gpu"
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
    opened = None
    if a.cupy_first:  # the old order: spmd imported CuPy, spmd.job opened the communicator, then PyTorch came
        import cupy

        from spmd.comm.nccl import NCCLCommunicator

        cupy.cuda.Device(local % cupy.cuda.runtime.getDeviceCount()).use()
        opened = NCCLCommunicator(comm)
    import mlp
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from spmd.core.timing import PhaseTimer
    from spmd.workloads.torch.compute import make_optimizer
    from spmd.workloads.torch.dist import libraries
    from spmd.workloads.torch.params import TorchParams
    from spmd.workloads.torch.step import Batches, Trainer

    default = TorchParams(model="m.py:build")
    if gpu:
        torch.cuda.set_device(local % torch.cuda.device_count())
        on = torch.device("cuda", torch.cuda.current_device())
    else:
        on = torch.device("cpu")
        torch.set_num_threads(1)  # launch-bound: the host path is what is measured
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    xp = np
    if gpu:  # the timer's events, as spmd.job's on a GPU
        import cupy as xp

        xp.cuda.Device(torch.cuda.current_device()).use()
    store = dist.TCPStore("127.0.0.1", 0, world, True, wait_for_workers=False) if rank == 0 else None
    port = comm.bcast(store.port if store else None)
    if store is None:
        store = dist.TCPStore("127.0.0.1", port, world, False)
    dist.init_process_group("nccl" if gpu else "gloo", store=store, rank=rank, world_size=world)
    features = 16 if a.size == "tiny" else mlp.WIDTHS[a.size][0]
    rng = np.random.default_rng(1 + rank)
    x = torch.from_numpy(rng.standard_normal((ROWS, features)).astype(np.float32)).to(on)
    y = torch.from_numpy(rng.integers(0, 10, ROWS)).to(on)
    device_ids = [on.index] if gpu else None

    for batch in [int(b) for b in a.batch.split(",")]:
        idx = rng.integers(0, ROWS, (a.steps, batch))

        def plain():
            m = module(torch, a.size, on)
            ddp = DDP(m, device_ids=device_ids, bucket_cap_mb=default.bucket_mb)
            opt = make_optimizer(torch, default.optimizer, m.parameters())
            rows = torch.from_numpy(idx).to(on)

            def window():
                for i in range(a.steps):
                    opt.zero_grad(set_to_none=True)
                    r = rows[i]
                    loss = torch.nn.functional.cross_entropy(ddp(x.index_select(0, r)), y.index_select(0, r))
                    loss.backward()
                    opt.step()

            return window

        def spmd(**params):
            p = TorchParams(model="m.py:build", batch=batch, steps=a.steps, **params)
            batches = Batches(torch, x, y, "device", on, torch.float32, None)
            ctx = types.SimpleNamespace(device=a.device, rank=rank, xp=xp)
            trainer = Trainer(
                torch, ctx, p, module(torch, a.size, on), torch.nn.functional.cross_entropy, batches, a.steps
            )

            def window():
                trainer.load_window(idx)
                timer = PhaseTimer(xp)
                timer.start_repeat()
                trainer.run_window(a.steps, timer)
                timer.end_repeat()

            return window

        arrangements = {
            "plain DDP loop": plain(),
            "spmd, phases: false": spmd(phases=False),
            "spmd, phase_every 8": spmd(phase_every=8),
            f"spmd, phase_every {default.phase_every} (default)": spmd(),
        }
        per_step = {name: [] for name in arrangements}
        for w in range(a.windows + 1):  # the first warms up
            for name, window in arrangements.items():
                sync()
                comm.Barrier()
                t0 = time.perf_counter()
                window()
                sync()
                seconds = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
                if w:
                    per_step[name].append(seconds / a.steps * 1e6)
        if rank == 0:
            line = {
                "size": a.size,
                "batch": batch,
                "ranks": world,
                "device": a.device,
                "cupy_first": a.cupy_first,
                "libraries": libraries(torch, gpu),
                "graph_mixing": os.environ.get("NCCL_GRAPH_MIXING_SUPPORT"),
                "us_per_step": {name: round(statistics.median(v), 1) for name, v in per_step.items()},
                "windows_us": {name: [round(t, 1) for t in v] for name, v in per_step.items()},
            }
            print(json.dumps(line), flush=True)
        del arrangements
        if gpu:
            torch.cuda.empty_cache()
    dist.destroy_process_group()
    if opened is not None:
        opened.close()


if __name__ == "__main__":
    main()

"""What spmd's eager DDP step adds to a plain DDP loop, in one process, windows interleaved so drift hits all alike:
the same tiny launch-bound MLP, data, optimizer and rows through a loop written by hand and through workload
torch's Stepper untimed, timed on one step in 8 and on one step in spmd's default ``phase_every``. One world of one
rank (gloo on a CPU, NCCL on a GPU); one JSON line: each arrangement's median microseconds per step.

    python -m bench.tools.torch_step_cost [--device cpu|gpu] [--windows 12] [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import time
import types

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from spmd.timing import PhaseTimer
from spmd.workloads.torch.params import TorchParams
from spmd.workloads.torch.step import Batches, Stepper, make_optimizer

DEFAULT = TorchParams(model="m.py:build")


def module(on):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)).to(on)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--windows", type=int, default=12)
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args()
    gpu = a.device == "gpu"
    on = torch.device("cuda", 0) if gpu else torch.device("cpu")
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    if not gpu:
        torch.set_num_threads(1)  # launch-bound: the host path is what is measured
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 1, True)
    dist.init_process_group("nccl" if gpu else "gloo", store=store, rank=0, world_size=1)
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((4096, 16)).astype(np.float32)).to(on)
    y = torch.from_numpy(rng.integers(0, 10, 4096)).to(on)
    idx = rng.integers(0, 4096, (a.steps, 32))

    def plain():
        m = module(on)
        ddp = DDP(m, device_ids=[0] if gpu else None, bucket_cap_mb=DEFAULT.bucket_mb)
        opt = make_optimizer(torch, DEFAULT.optimizer, m.parameters())
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
        p = TorchParams(model="m.py:build", batch=32, steps=a.steps, **params)
        batches = Batches(torch, x, y, "device", on, torch.float32, None)
        ctx = types.SimpleNamespace(device=a.device, rank=0, xp=np)
        stepper = Stepper(torch, ctx, p, module(on), torch.nn.functional.cross_entropy, batches, a.steps)

        def window():
            stepper.load_window(idx)
            timer = PhaseTimer(np)
            timer.start_repeat()
            stepper.run_window(a.steps, timer)
            timer.end_repeat()

        return window

    arrangements = {
        "plain DDP loop": plain(),
        "spmd, phases: false": spmd(phases=False),
        "spmd, phase_every 8": spmd(phase_every=8),
        f"spmd, phase_every {DEFAULT.phase_every} (default)": spmd(),
    }
    per_step = {name: [] for name in arrangements}
    for w in range(a.windows + 1):  # the first warms up
        for name, window in arrangements.items():
            sync()
            t0 = time.perf_counter()
            window()
            sync()
            if w:
                per_step[name].append((time.perf_counter() - t0) / a.steps * 1e6)
    print(json.dumps({name: round(statistics.median(v), 1) for name, v in per_step.items()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

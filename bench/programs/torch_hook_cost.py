"""What timing DDP's buckets costs a step: DDP's own C++ allreduce against the same allreduce through a Python comm hook
(DDP's ``allreduce_hook``, as spmd's phase hook calls it), and spmd's arrangement (an instrumented twin DDP on one step
in params.phase_every, plain DDP on the others), in one process, windows interleaved so drift hits all alike.

    python bench/programs/torch_hook_cost.py [--out FILE.json] [--device cpu|gpu --size tiny --batch 32 --windows 15]

Prints one JSON line: each arrangement's median microseconds per step over the windows (the torch suite's case).

``--size tiny`` (16-16-10, launch-bound: the step is little more than its host overhead) or the medium and large MLPs of
examples/torch."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples/torch"))
from mlp import WIDTHS  # noqa: E402

from spmd.workloads.torch.params import TorchParams  # noqa: E402

EVERY = TorchParams.__dataclass_fields__["phase_every"].default  # spmd's default
TWIN = f"spmd: twin on 1 step in {EVERY}"

WIDTHS = {"tiny": (16, 16, 10), **WIDTHS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--size", default="tiny", choices=("tiny", *WIDTHS))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--windows", type=int, default=15)
    a = ap.parse_args()

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    gpu = a.device == "gpu"
    on = "cuda" if gpu else "cpu"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    if not gpu:
        torch.set_num_threads(len(os.sched_getaffinity(0)))
    dist.init_process_group(
        "nccl" if gpu else "gloo", store=dist.TCPStore("127.0.0.1", 0, 1, True), rank=0, world_size=1
    )

    def hook(state, bucket):
        return allreduce_hook(state, bucket)

    def setup(kind: str):
        torch.manual_seed(0)
        widths = WIDTHS[a.size]
        layers = [torch.nn.Linear(i, o) for i, o in zip(widths[:-1], widths[1:])]
        model = torch.nn.Sequential(*(m for layer in layers for m in (layer, torch.nn.ReLU())))[:-1].to(on)
        ids = [0] if gpu else None
        plain = DDP(model, device_ids=ids, bucket_cap_mb=25)
        marked = plain
        if kind == "hook every step":
            plain.register_comm_hook(None, hook)
        elif kind == TWIN:
            marked = DDP(model, device_ids=ids, bucket_cap_mb=25)
            marked.register_comm_hook(None, hook)
        return plain, marked, torch.optim.AdamW(model.parameters(), lr=1e-3)

    kinds = ("DDP's C++ allreduce", "hook every step", TWIN)
    setups = {kind: setup(kind) for kind in kinds}
    x = torch.randn(4096, WIDTHS[a.size][0], device=on)
    y = torch.randint(0, 10, (4096,), device=on)
    idx = torch.randint(0, 4096, (a.steps, a.batch), device=on)
    per_step = {kind: [] for kind in kinds}
    for window in range(a.windows + 1):  # the first warms up
        for kind, (plain, marked, opt) in setups.items():
            sync()
            t0 = time.perf_counter()
            for i in range(a.steps):
                ddp = marked if (i + 1) % EVERY == 0 else plain
                opt.zero_grad(set_to_none=True)
                rows = idx[i]
                loss = torch.nn.functional.cross_entropy(ddp(x.index_select(0, rows)), y.index_select(0, rows))
                loss.backward()
                opt.step()
            sync()
            if window:
                per_step[kind].append((time.perf_counter() - t0) / a.steps * 1e6)
    dist.destroy_process_group()
    out = {
        "device": a.device,
        "size": a.size,
        "batch": a.batch,
        "steps": a.steps,
        "windows": a.windows,
        "torch": torch.__version__,
        "us_per_step": per_step,
        "median_us": {k: statistics.median(v) for k, v in per_step.items()},
    }
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out["median_us"]), flush=True)


if __name__ == "__main__":
    main()

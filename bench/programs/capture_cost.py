"""What kernel-level capture costs a real model's training step on one GPU: the plain DDP loop of
model_step_cost.py (one rank), windows by turns in one process: uncaptured, captured as spmd captures (torch.profiler
with CPU and CUDA activity, ProfilerStep marks), captured with CUDA activity alone; and the uncaptured windows
before the first capture against those after it (CUPTI left active slows later steps, a known PyTorch issue). One JSON
line: each kind's median microseconds per step and every window's.

    python bench/programs/capture_cost.py [--models gpt2,resnet50] [--rounds 5] [--steps 10] [--small]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from model_step_cost import model_and_data, plain_loop, start_group, sync


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2,resnet50")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--device", default="gpu", choices=("gpu", "cpu"))
    a = ap.parse_args()
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    gpu = a.device == "gpu"
    on = torch.device("cuda", 0) if gpu else torch.device("cpu")
    start_group(torch, 0, 1, gpu, comm=_Solo())
    for name in a.models.split(","):
        module, loss_fn, x, y = model_and_data(torch, name, a.small, gpu, on, seed=0)
        batch = 8 if name == "gpt2" else 64
        idx = np.random.default_rng(2).integers(0, len(x), (a.steps, batch))
        # one step of model_step_cost's plain loop at a time: a window of one row of indices
        step = plain_loop(torch, module, loss_fn, x, y, batch, idx[:1], [0] if gpu else None, gpu)

        def window() -> None:
            for _ in range(a.steps):
                step()

        def timed() -> float:
            sync(torch, gpu)
            t0 = time.perf_counter()
            window()
            sync(torch, gpu)
            return (time.perf_counter() - t0) / a.steps * 1e6

        def captured(activities) -> float:
            prof = profile(
                activities=activities,
                schedule=schedule(wait=0, warmup=1, active=a.steps, repeat=1),
                on_trace_ready=lambda p: None,
            )
            prof.start()
            step()  # the profiler's warm-up step, untimed (spmd's capture has one too)
            prof.step()
            sync(torch, gpu)
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step()
                prof.step()
            sync(torch, gpu)
            seconds = time.perf_counter() - t0
            prof.stop()
            return seconds / a.steps * 1e6

        for _ in range(3):
            window()
        out = {"before": [], "cpu+cuda": [], "cuda": [], "after": []}
        out["before"] = [timed() for _ in range(a.rounds)]
        both = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
        for _ in range(a.rounds):
            out["cpu+cuda"].append(captured(both))
            out["after"].append(timed())
            if gpu:
                out["cuda"].append(captured([ProfilerActivity.CUDA]))
                out["after"].append(timed())
        med = {k: statistics.median(v) for k, v in out.items() if v}
        print(
            json.dumps(
                {
                    "model": name,
                    "median_us": med,
                    "captured_over_before": med["cpu+cuda"] / med["before"],
                    "cuda_only_over_before": med.get("cuda", float("nan")) / med["before"],
                    "after_over_before": med["after"] / med["before"],
                    "windows_us": out,
                }
            ),
            flush=True,
        )


class _Solo:
    """start_group's communicator for one process: nothing to agree."""

    def bcast(self, value):
        return value


if __name__ == "__main__":
    main()

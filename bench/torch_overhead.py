"""No hidden cost: spmd's ``workload: torch`` (strategy ddp) against the same model in a plain DDP script by hand.

Same model (examples/torch/mlp.py, ``--size``), per-GPU batch, precision (fp32), bucket size (25 MiB), AdamW,
rows resident on the device; the plain script times windows of ``--steps`` steps the way spmd does (device
synchronized at both ends) and reports the median window. ``--runs`` runs of each, interleaved; the raw
numbers go to ``--out`` as JSON (read by bench/claims.py). Usage on a GPU machine:

    python bench/torch_overhead.py --out DIR [--size large --batch 256 --runs 3]
    python bench/torch_overhead.py --plain --size large --batch 256     (one plain run, prints JSON)
    python bench/torch_overhead.py --device cpu --out DIR --size medium --batch 32   (gloo, no GPU: host overhead)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def plain(size: str, batch: int, steps: int, windows: int, rows: int, device: str = "gpu") -> dict:
    """The hand-written DDP training loop (one process, world size 1): samples/s of the median window."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    sys.path.insert(0, str(ROOT / "examples/torch"))
    import mlp

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gpu = device == "gpu"
    on = "cuda" if gpu else "cpu"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    if not gpu:  # as spmd gives one rank: the cores it may use
        torch.set_num_threads(len(os.sched_getaffinity(0)))
    store = dist.TCPStore("127.0.0.1", 0, 1, True)
    dist.init_process_group("nccl" if gpu else "gloo", store=store, rank=0, world_size=1)
    torch.manual_seed(0)
    model = mlp.build({"options": {"size": size}}).to(on)
    ddp = DDP(model, device_ids=[0] if gpu else None, bucket_cap_mb=25)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    features = mlp.WIDTHS[size][0]
    x = torch.randn(rows, features, device=on)
    y = torch.randint(0, 10, (rows,), device=on)
    times = []
    for w in range(windows + 1):  # the first window warms up
        idx = torch.randint(0, rows, (steps, batch), device=on)
        sync()
        t0 = time.perf_counter()
        for i in range(steps):
            opt.zero_grad(set_to_none=True)
            rows_i = idx[i]
            loss = torch.nn.functional.cross_entropy(ddp(x.index_select(0, rows_i)), y.index_select(0, rows_i))
            loss.backward()
            opt.step()
        sync()
        if w:
            times.append(time.perf_counter() - t0)
    dist.destroy_process_group()
    return {"samples_per_s": batch * steps / statistics.median(times), "windows_s": times}


VARIANTS = {  # name -> (strategy, params overrides, environment)
    "ddp": ("ddp", {}, {}),
    "ddp-no-phases": ("ddp", {"phases": False}, {}),
    "ddp-every-step": ("ddp", {"phase_every": 1}, {}),
    "compile": ("compile", {}, {}),
    "ddp-graph": ("ddp-graph", {}, {}),
}


def spmd_run(
    size: str, batch: int, steps: int, windows: int, rows: int, variant: str, work: Path, device: str = "gpu"
) -> dict:
    """The same training under ``spmd run`` (one rank); samples/s from its report (median repeat)."""
    strategy, extra, env = VARIANTS[variant]
    features = {"medium": 844, "large": 4812}[size]
    cfg = work / f"{variant}.yaml"
    cfg.write_text(
        json.dumps(
            {
                "workload": "torch",
                "warmup": 1,
                "repeats": windows,
                "device": device,
                "input": {"path": str(work / "data.h5"), "dataset": "x"},
                "generate": {"shape": [rows, features], "dtype": "float32", "seed": 1},
                "params": {
                    "model": str(ROOT / "examples/torch/mlp.py:build"),
                    "options": {"size": size},
                    "labels": {"dataset": "y"},
                    "batch": batch,
                    "steps": steps,
                    "strategy": strategy,
                    "optimizer": {"name": "adamw", "lr": 1e-3},
                    "bucket_mb": 25,
                    **extra,
                },
                "output": str(work / f"out-{variant}"),
                "timeout_s": 600,
            }
        )
    )
    launch = os.environ.get("SPMD_MPIEXEC", "mpiexec").split()
    subprocess.run([sys.executable, "-m", "spmd", "generate", str(cfg)], check=True, capture_output=True)
    done = subprocess.run(
        [
            *launch,
            "-n",
            "1",
            *(x for k, v in env.items() for x in ("-x", f"{k}={v}")),
            sys.executable,
            "-m",
            "spmd",
            "run",
            str(cfg),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    if done.returncode:
        return {"failed": done.stderr[-1500:]}
    report = json.loads((work / f"out-{variant}" / "report.json").read_text())
    return {
        "samples_per_s": report["metrics"]["samples_per_s"],
        "verified": report["verified"],
        "phase_ms_per_step": report["metrics"]["phase_ms_per_step"],
        "reference_seconds": report["verification"].get("reference_seconds"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--plain", action="store_true")
    ap.add_argument("--size", default="large")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--rows", type=int, default=16384)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    a = ap.parse_args()
    if a.plain:
        print(json.dumps(plain(a.size, a.batch, a.steps, a.windows, a.rows, a.device)))
        return
    results = {
        "size": a.size,
        "batch": a.batch,
        "steps": a.steps,
        "windows": a.windows,
        "precision": "fp32",
        "device": a.device,
        "bucket_mb": 25,
        "optimizer": "adamw",
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(a.runs):
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--plain",
                    "--size",
                    a.size,
                    "--batch",
                    str(a.batch),
                    "--steps",
                    str(a.steps),
                    "--windows",
                    str(a.windows),
                    "--rows",
                    str(a.rows),
                    "--device",
                    a.device,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            entry = {"run": run, "plain_ddp": json.loads(done.stdout.strip().splitlines()[-1])}
            for variant in ["ddp", *(v for v in a.variants.split(",") if v != "ddp")]:
                entry[f"spmd_{variant}"] = spmd_run(
                    a.size, a.batch, a.steps, a.windows, a.rows, variant, Path(tmp), a.device
                )
            results["runs"].append(entry)
            print(json.dumps(entry), flush=True)
            save(
                results, Path(a.out) / f"torch-overhead-{a.device}-{a.size}-b{a.batch}.json"
            )  # each run: a time limit keeps some
    print(f"spmd ddp / plain DDP, median of {len(results['runs'])}: {results['ratio_median']:.3f}")


def save(results: dict, path: Path) -> None:
    """The raw runs and the median over runs of each run's spmd ddp / plain DDP ratio."""
    results["ratio_median"] = statistics.median(
        r["spmd_ddp"]["samples_per_s"] / r["plain_ddp"]["samples_per_s"] for r in results["runs"]
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""Data-parallel training (workload train) against PyTorch's strongest setup at the study's batches: spmd's
captured step against PyTorch eager, its whole step captured in a CUDA graph, torch.compile and compile's own
graphs, the same MLP, batch, SGD and data on the GPU, one GPU; and on two GPUs against DDP in the same setups."""

from __future__ import annotations

import json
import random

from ..records import Measure
from . import Case
from .train_gemms import step_gemms

PEERS = ("torch-eager", "torch-graph", "torch-compile", "torch-compile-graphs")


def table(env) -> dict:
    """The batches measured: the study's smallest and largest per model (all of them is bench's --only train)."""
    if env.quick:
        return {"medium": "16"}
    return {"medium": "16,1024", "large": "8,512"}


def generated(env) -> None:
    for config in ("inputs/train.yaml", "inputs/train-large.yaml"):
        env.spmd("generate", config, ranks=None)


def spmd_lines(env, models: str, batches: str, ranks: str, steps: int) -> list[dict]:
    done = env.program(
        "train_sweep.py",
        "--models",
        models,
        "--batches",
        batches,
        "--ranks",
        ranks,
        "--variants",
        "graph",
        "--steps",
        steps,
        ranks=int(ranks.split(",")[-1]),
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def torch_lines(env, models: str, batches: str, ranks: int, steps: int, runs: int) -> list[dict]:
    port = str(random.randint(20000, 40000))
    done = env.program(
        "train_torch.py",
        "--models",
        models,
        "--batches",
        batches,
        "--steps",
        steps,
        "--runs",
        runs,
        "--variants",
        ",".join(PEERS),
        ranks=ranks,
        env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "NCCL_GRAPH_MIXING_SUPPORT": "0"},
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def against_torch(env, runs: int, gpus: int) -> list[list[Measure]]:
    generated(env)
    steps = 50 if env.quick else 200
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    ranks = "1" if gpus == 1 else f"1,{gpus}"
    for model, batches in table(env).items():
        for run in range(runs):
            for line in spmd_lines(env, model, batches, ranks, steps):
                if line["gpus"] != gpus:
                    continue
                case = f"{model} batch {line['batch']} per GPU, fp32, {gpus} GPU(s)"
                per_run[run].append(
                    Measure(
                        case,
                        "spmd (step captured)",
                        line["samples_per_s"],
                        "training rate",
                        "samples/s",
                        params={"graph": line["graph"]},
                    )
                )
        for line in torch_lines(env, model, batches, gpus, steps, runs):
            if "error" in line:
                continue  # a setup this machine cannot run is absent from its case, said in the manifest's log
            case = f"{model} batch {line['batch']} per GPU, fp32, {gpus} GPU(s)"
            for run, value in enumerate(line["runs_samples_per_s"][:runs]):
                per_run[run].append(
                    Measure(
                        case,
                        f"PyTorch {line['variant'].removeprefix('torch-')}" + (" (DDP)" if gpus > 1 else ""),
                        value,
                        "training rate",
                        "samples/s",
                        "peer",
                    )
                )
    return per_run


def cases(env) -> list[Case]:
    return [
        Case(
            "one GPU against PyTorch", lambda e, runs: against_torch(e, runs, 1), needs=("gpu", "torch"), batched=True
        ),
        Case(
            "two GPUs against PyTorch DDP",
            lambda e, runs: against_torch(e, runs, 2),
            needs=("gpu", "torch", "ranks2"),
            batched=True,
        ),
        Case("GEMMs against nvmath-python", step_gemms, needs=("gpu", "nvmath")),
    ]

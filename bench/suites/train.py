"""Data-parallel training (workload train) against PyTorch's strongest setup at the smallest and largest batches of each
model: spmd's captured step against PyTorch eager, its whole step captured in a CUDA graph, torch.compile and compile's
own graphs, the same MLP, batch, SGD and data on the GPU, one GPU; in bf16 (spmd's params.precision: bf16 against
PyTorch's autocast, graph-captured and compiled) at the largest batches; and on two GPUs against DDP. Beside them, spmd
against itself: its GEMMs against nvmath-python's, what timing the phases costs the captured step, and the optimizer's
update inside backward against after it."""

from __future__ import annotations

import json
import random

from ..records import Measure
from . import Case
from .train_gemms import step_gemms

PEERS = {
    "fp32": ("torch-eager", "torch-graph", "torch-compile", "torch-compile-graphs"),
    # PyTorch's mixed precision (autocast to bfloat16) in its two fastest setups
    "bf16": ("torch-graph-bf16", "torch-compile-graphs-bf16"),
}
SPMD_VARIANT = {"fp32": "graph", "bf16": "graph-bf16"}  # bench/programs/train_sweep.py's variants


def table(env, precision: str = "fp32") -> dict:
    """The batches measured: the smallest and largest per model in fp32, the largest in bf16 (where
    tensor cores run the GEMMs)."""
    if env.quick:
        return {"medium": "16"}
    if precision == "bf16":
        return {"medium": "1024", "large": "512"}
    return {"medium": "16,1024", "large": "8,512"}


def generated(env) -> None:
    for config in ("inputs/train.yaml", "inputs/train-large.yaml"):
        env.spmd("generate", config, ranks=None)


def spmd_lines(env, models: str, batches: str, ranks: str, steps: int, variant: str = "graph") -> list[dict]:
    done = env.program(
        "train_sweep.py",
        "--models",
        models,
        "--batches",
        batches,
        "--ranks",
        ranks,
        "--variants",
        variant,
        "--steps",
        steps,
        ranks=int(ranks.split(",")[-1]),
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def torch_lines(env, models: str, batches: str, ranks: int, steps: int, runs: int, peers=PEERS["fp32"]) -> list[dict]:
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
        ",".join(peers),
        ranks=ranks,
        env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "NCCL_GRAPH_MIXING_SUPPORT": "0"},
    )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def against_torch(env, runs: int, gpus: int, precision: str = "fp32") -> list[list[Measure]]:
    generated(env)
    steps = 50 if env.quick else 200
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    ranks = "1" if gpus == 1 else f"1,{gpus}"
    for model, batches in table(env, precision).items():
        for run in range(runs):
            for line in spmd_lines(env, model, batches, ranks, steps, SPMD_VARIANT[precision]):
                if line["gpus"] != gpus:
                    continue
                case = f"{model} batch {line['batch']} per GPU, {precision}, {gpus} GPU(s)"
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
        for line in torch_lines(env, model, batches, gpus, steps, runs, PEERS[precision]):
            if "error" in line:
                continue  # a setup this machine cannot run is absent from its case, said in the manifest's log
            case = f"{model} batch {line['batch']} per GPU, {precision}, {gpus} GPU(s)"
            for run, value in enumerate(line["runs_samples_per_s"][:runs]):
                per_run[run].append(
                    Measure(
                        case,
                        f"PyTorch {line['variant'].removeprefix('torch-').removesuffix('-bf16')}"
                        + (" (DDP)" if gpus > 1 else ""),
                        value,
                        "training rate",
                        "samples/s",
                        "peer",
                    )
                )
    return per_run


def spmd_variants(env, runs: int, question: str, variants: dict) -> list[list[Measure]]:
    """One GPU, fp32, the table's batches: spmd's captured step in train_sweep.py's ``variants`` (variant ->
    (subject, role)), each sweep launched once per run, the variants interleaved; the case is named by
    ``question``."""
    generated(env)
    steps = 50 if env.quick else 200
    per_run: list[list[Measure]] = [[] for _ in range(runs)]
    for model, batches in table(env).items():
        for run in range(runs):
            for variant, (subject, role) in variants.items():
                for line in spmd_lines(env, model, batches, "1", steps, variant):
                    per_run[run].append(
                        Measure(
                            f"{model} batch {line['batch']}, fp32, 1 GPU: {question}",
                            subject,
                            line["samples_per_s"],
                            "training rate",
                            "samples/s",
                            role,
                            params={"graph": line["graph"]},
                        )
                    )
    return per_run


def update_in_backward(env, runs: int) -> list[list[Measure]]:
    """Each layer's update on a second stream inside backward against the update after backward (train's default),
    in the default backward order and in ``inputs_first`` (layer 0's gradients first, so its update can start
    earliest), and that order alone: whether the optimizer's pass hides behind backward, and what the order costs
    apart from the overlap."""
    variants = {
        "graph": ("spmd, update after backward", "peer"),
        "graph-inbackward": ("spmd, update inside backward", "result"),
        "graph-inputs-first": ("spmd, update after backward, inputs_first order", "result"),
        "graph-inputs-first-inbackward": ("spmd, update inside backward, inputs_first order", "result"),
    }
    return spmd_variants(env, runs, "where the update runs", variants)


def phase_marks(env, runs: int) -> list[list[Measure]]:
    """The default (params.phases: true, the window's last step replaying the capture with the phase events)
    against no phase events at all: what timing the phases costs the step."""
    variants = {"graph": ("spmd, phases timed", "result"), "graph-nophases": ("spmd, phases off", "peer")}
    return spmd_variants(env, runs, "what timing the phases costs", variants)


def cases(env) -> list[Case]:
    return [
        Case(
            "one GPU against PyTorch", lambda e, runs: against_torch(e, runs, 1), needs=("gpu", "torch"), batched=True
        ),
        Case(
            "one GPU in bf16 against PyTorch's autocast",
            lambda e, runs: against_torch(e, runs, 1, "bf16"),
            needs=("gpu", "torch"),
            batched=True,
        ),
        Case(
            "two GPUs against PyTorch DDP",
            lambda e, runs: against_torch(e, runs, 2),
            needs=("gpu", "torch", "ranks2"),
            batched=True,
        ),
        Case("GEMMs against nvmath-python", step_gemms, needs=("gpu", "nvmath")),
        Case("phase marks", phase_marks, needs=("gpu",), batched=True),
        Case("update inside backward", update_in_backward, needs=("gpu",), batched=True),
    ]

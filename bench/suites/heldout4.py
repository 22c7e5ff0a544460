"""Held-out validation of ``spmd predict``, fourth round: the model as frozen at FROZEN (after a sweep fitted on one
rank priced, above each interval, what ranks do to each other that it never saw: each halo call's host cost and a
training step's wait in the allreduce for the other ranks' hosts; the files of heldout.MODEL_PATHS unchanged since),
on eight cases chosen with it and before any of them was measured, none used while designing the model or in an
earlier round (other seeds, sizes, iterations, batches and precisions, stencils bound by their host and not, and a
model family never used before, torchvision's MobileNetV3).

Each case is predicted as in the third round (heldout3.measure_round): fitted on one GPU and predicted for the N GPUs
over NVLink from the ``nvlink4`` preset and from the target's link test; fitted on the 1-N sweep over NVLink and
predicted for the same GPUs with peer-to-peer off from the target's link test there. The intervals of the first two
are what this round tests. Published apart from the in-sample tables and the earlier rounds (docs/validation.md)."""

from __future__ import annotations

from pathlib import Path

from . import Case
from .heldout import array_job, mlp_job, stencil_job, torch_job
from .heldout3 import predictions as predictions  # each case's modes times the kinds of input, as the third's
from .heldout3 import round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "dec5a25e9b2b270b8a3128eccc78cb4541b63002"
SUITE = "heldout4"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured."""
    gpu = env.gpus > 0
    n = 4608 if gpu else 1152
    mobilenet = str(Path(__file__).resolve().parents[1] / "models/mobilenet.py:build")
    both = ("strong", "weak")
    mlp = mlp_job(env, [32768, 2048], 131, [2048, 8192, 10], 1024)
    return {
        "reduce, seed 107, float32": (array_job(env, "reduce", [3 << 24 if gpu else 3 << 20], 107), both),
        f"matmul, {n} square": (array_job(env, "matmul", [n, n], 109), both),
        **stencil_job(env, 3072 if gpu else 768, 300 if gpu else 30, 113),
        **stencil_job(env, 12288 if gpu else 1536, 30 if gpu else 10, 127),
        "train, an MLP of 2048-8192-10 at batch 1024": (mlp, both),
        "gpt2, 24 x 256 tokens, bf16": (torch_job(env, "gpt2", {"shape": [1536, 256], "seed": 137}, batch=24), both),
        "resnet50, batch 32 of 3x224x224, bf16": (
            torch_job(env, "resnet50", {"shape": [512, 3, 224, 224], "seed": 139}, batch=32, precision="bf16"), both),
        "mobilenet-v3-large, batch 128 of 3x160x160, bf16": (
            torch_job(env, "resnet50", {"shape": [1024, 3, 160, 160], "seed": 149}, batch=128, model=mobilenet,
                      options={"classes": 100}), both),
    }  # fmt: skip


def cases(env) -> list[Case]:
    return round_cases(cases_list(env), SUITE, FROZEN, ("gpt2", "resnet50", "mobilenet"))

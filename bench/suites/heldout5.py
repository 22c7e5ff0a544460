"""Held-out validation of ``spmd predict``, fifth round: the model as frozen at FROZEN (after a sweep fitted on one
rank added to each prediction at several what ranks do to each other that it never saw, the median of the rounds 1-4
measured, each halo call's host cost and a training step's wait in the allreduce for the other ranks' hosts, and their
spread to its interval; the files of heldout.MODEL_PATHS unchanged since), on six cases chosen with it and before any
of them was measured, none used while designing the model or in an earlier round (other seeds, grids, iterations,
widths, batches and tokens: three stencils, two bound by their host and one by its GPU, an MLP, GPT-2, and a model
family never used before, torchvision's DenseNet-121).

Each case is predicted as in the third round (heldout3.measure_round): fitted on one GPU and predicted for the N GPUs
over NVLink from the ``nvlink4`` preset and from the target's link test; fitted on the 1-N sweep over NVLink and
predicted for the same GPUs with peer-to-peer off from the target's link test there. The point predictions of the
first two are what this round tests. Published apart from the in-sample tables and the earlier rounds
(docs/validation.md)."""

from __future__ import annotations

from pathlib import Path

from . import Case
from .heldout import mlp_job, stencil_job, torch_job
from .heldout3 import predictions as predictions  # each case's modes times the kinds of input, as the third's
from .heldout3 import round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "9a6d60acabcc2ccf7cbbd4831ab5a98e651e2878"
SUITE = "heldout5"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured."""
    gpu = env.gpus > 0
    densenet = str(Path(__file__).resolve().parents[1] / "models/densenet.py:build")
    both = ("strong", "weak")
    mlp = mlp_job(env, [16384, 4096], 167, [4096, 2048, 10], 512)
    return {
        **stencil_job(env, 4608 if gpu else 640, 160 if gpu else 25, 151),
        **stencil_job(env, 1536 if gpu else 384, 600 if gpu else 60, 157),
        **stencil_job(env, 16384 if gpu else 2048, 20 if gpu else 8, 163),
        "train, an MLP of 4096-2048-10 at batch 512": (mlp, both),
        "gpt2, 16 x 256 tokens, bf16": (torch_job(env, "gpt2", {"shape": [1024, 256], "seed": 173}, batch=16), both),
        "densenet-121, batch 64 of 3x128x128, bf16": (
            torch_job(env, "resnet50", {"shape": [1024, 3, 128, 128], "seed": 179}, batch=64, model=densenet,
                      options={"classes": 100}), both),
    }  # fmt: skip


def cases(env) -> list[Case]:
    return round_cases(cases_list(env), SUITE, FROZEN, ("gpt2", "densenet"))

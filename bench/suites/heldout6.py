"""Held-out validation of ``spmd predict``, sixth round: the model as frozen at FROZEN (after the link test measured
the host's reads by each engine a run may read with and a prediction bound a sweep's reads by the ceiling of the
engine it read with; the files of heldout.MODEL_PATHS unchanged since), on five cases chosen with it and before any
of them was measured, none used while designing the model or in an earlier round (other seeds, grids, iterations and
sizes: two stencils whose reads go through the host's memory, matmul, reduce in float64, and a model family never used
before, torchvision's RegNetY-800MF).

Each case is predicted as in the third round (heldout3.measure_round): fitted on one GPU and predicted for the N GPUs
over NVLink from the ``nvlink4`` preset and from the target's link test; fitted on the 1-N sweep over NVLink and
predicted for the same GPUs with peer-to-peer off from the target's link test there. What this round tests is the
prediction from the target's link test fitted on one GPU, whose reads the change bounds. Published apart from the
in-sample tables and the earlier rounds (docs/validation.md)."""

from __future__ import annotations

from pathlib import Path

from . import Case
from .heldout import array_job, stencil_job, torch_job
from .heldout3 import predictions as predictions  # each case's modes times the kinds of input, as the third's
from .heldout3 import round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "a59de485c8a4037ec46b38ac3c316e42ac0a5790"
SUITE = "heldout6"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured."""
    gpu = env.gpus > 0
    n = 9216 if gpu else 1408
    regnet = str(Path(__file__).resolve().parents[1] / "models/regnet.py:build")
    both = ("strong", "weak")
    return {
        **stencil_job(env, 14336 if gpu else 1792, 24 if gpu else 8, 181),
        **stencil_job(env, 10240 if gpu else 1280, 40 if gpu else 12, 191),
        f"matmul, {n} square": (array_job(env, "matmul", [n, n], 193), both),
        "reduce, seed 197, float64": (array_job(env, "reduce", [5 << 24 if gpu else 5 << 20], 197, "float64"), both),
        "regnet-y-800mf, batch 96 of 3x144x144, bf16": (
            torch_job(env, "resnet50", {"shape": [1152, 3, 144, 144], "seed": 199}, batch=96, model=regnet,
                      options={"classes": 100}), both),
    }  # fmt: skip


def cases(env) -> list[Case]:
    return round_cases(cases_list(env), SUITE, FROZEN, ("regnet",))

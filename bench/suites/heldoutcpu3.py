"""Held-out validation of ``spmd predict`` on CPUs, third round, at 4 and 8 ranks: the model the seventh round was
frozen at when this round was listed, FROZEN (the second CPU round's model, its node term's docstring since told what
that round found; the files of heldout.MODEL_PATHS unchanged since), on four cases chosen before any of them was
measured, none used while designing the model nor in an earlier round (other seeds, sizes and precisions of reduce,
matmul, a stencil and another MLP's training, NumPy on a node's cores). No model change was made for it: it measures
again, on new cases, what the second CPU round measured.

Each case is fitted, measured and predicted as in the first two CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried and from the target's own.
Published apart from the in-sample tables, the earlier CPU rounds and the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "b62ec961f0df4da2b945e5b07db7426538d22a1a"
SUITE = "heldoutcpu3"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 256 if quick else 2304
    mlp = mlp_job(env, [4096 if quick else 32768, 256], 373, [256, 2048, 256, 10], 128 if quick else 768)
    listed = {
        "reduce, seed 353, float64": (array_job(env, "reduce", [1 << 16 if quick else 5 << 21], 353, "float64"), both),
        f"matmul, {n} square, float32": (array_job(env, "matmul", [n, n], 359), both),
        **stencil_job(env, 160 if quick else 2048, 4 if quick else 20, 367),
        "train, an MLP of 256-2048-256-10 at batch 768": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

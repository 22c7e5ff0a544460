"""Held-out validation of ``spmd predict`` on CPUs, second round, at 4 and 8 ranks: the model as frozen at FROZEN (the
node term as its pair of equal bytes shows it and a compute phase's growth held beyond the ranks its node was measured
with, designed on the first CPU round's runs, heldoutcpu, which are in-sample to it; the files of heldout.MODEL_PATHS
unchanged since), on four cases chosen before any of them was measured, none used while designing the model nor in an
earlier round (other seeds, sizes and precisions of reduce, matmul, a stencil and another MLP's training, NumPy on a
node's cores).

Each case is fitted, measured and predicted as in the first CPU round (``heldoutcpu.measure``): fitted with ``spmd scale
--ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8, predicted
for 4 and 8 ranks of one node from the fit's own 2-rank link test carried and from the target's own. Published apart
from the in-sample tables, the first CPU round and the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "0babe47a7f312e1a09ec570c1ae702e327248f43"
SUITE = "heldoutcpu2"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 256 if quick else 2048
    mlp = mlp_job(env, [4096 if quick else 32768, 512], 349, [512, 1024, 512, 10], 128 if quick else 512)
    listed = {
        "reduce, seed 331, float32": (array_job(env, "reduce", [1 << 16 if quick else 3 << 23], 331), both),
        f"matmul, {n} square, float32": (array_job(env, "matmul", [n, n], 337), both),
        **stencil_job(env, 192 if quick else 2560, 4 if quick else 16, 347),
        "train, an MLP of 512-1024-512-10 at batch 512": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

"""Held-out validation of ``spmd predict`` on CPUs, sixth round, at 4 and 8 ranks: the model as frozen at FROZEN (its
files, heldout.MODEL_PATHS, the seventh round's; designed on the first five CPU rounds' runs, which are in-sample to
it), measured with the workloads as they are since the fifth CPU round, which allocate no array of a block's or the
model's size after the first repeat, so that no rank's history in the sweep's launch (glibc's thresholds) makes the
upper half of its ranks slower (docs/validation.md, the fifth CPU round); on four cases chosen before any of them was
measured, none used while designing the model nor in an earlier round (other seeds, sizes and precisions of reduce,
matmul, a stencil and another MLP's training, NumPy on a node's cores).

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried (no cores charged) and from the
target's own, whose cores test ran as many ranks as the target has. Published apart from the in-sample tables, the
earlier CPU rounds and the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured (its files the seventh round's, the
# workloads without a rank's history); records of other model files are refused
FROZEN = "c2845b420da2e6404cd9cb34c2c1c30d4775b3eb"
SUITE = "heldoutcpu6"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 256 if quick else 2432
    mlp = mlp_job(env, [4096 if quick else 32768, 576], 449, [576, 1152, 288, 10], 128 if quick else 1152)
    listed = {
        "reduce, seed 439, float32": (array_job(env, "reduce", [1 << 16 if quick else 9 << 21], 439), both),
        f"matmul, {n} square, float64": (array_job(env, "matmul", [n, n], 443, "float64"), both),
        **stencil_job(env, 192 if quick else 2944, 4 if quick else 10, 457),
        "train, an MLP of 576-1152-288-10 at batch 1152": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

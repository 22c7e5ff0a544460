"""Held-out validation of ``spmd predict`` on CPUs, fourth round, at 4 and 8 ranks: the model as frozen at FROZEN (a
CPU compute phase charged the slowdown the target's link test measured on its node's cores, spmd.measure.cores,
instead of its node term held beyond the ranks the sweep ran on a node; designed on the first three CPU rounds' runs,
heldoutcpu to heldoutcpu3, which are in-sample to it, and on design launches of the test alone,
docs/results/cpu-16core/cores-design), on four cases chosen before any of them was measured, none used while designing
the model nor in an earlier round (other seeds, sizes and precisions of reduce, matmul, a stencil and another MLP's
training, NumPy on a node's cores).

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried (whose cores test ran no more
ranks than the sweep: nothing charged, the earlier rounds' model) and from the target's own, whose cores test ran as
many ranks as the target has. Published apart from the in-sample tables, the earlier CPU rounds and the GPU rounds
(docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "90bfa8f4194a4e3a701a1fdb888c08185e16c578"
SUITE = "heldoutcpu4"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 256 if quick else 1536
    mlp = mlp_job(env, [4096 if quick else 32768, 320], 409, [320, 1280, 640, 10], 128 if quick else 640)
    listed = {
        "reduce, seed 389, float32": (array_job(env, "reduce", [1 << 16 if quick else 3 << 22], 389), both),
        f"matmul, {n} square, float64": (array_job(env, "matmul", [n, n], 397, "float64"), both),
        **stencil_job(env, 224 if quick else 3072, 4 if quick else 12, 401),
        "train, an MLP of 320-1280-640-10 at batch 640": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

"""Held-out validation of ``spmd predict`` on CPUs, fifth round, at 4 and 8 ranks: the model as frozen at FROZEN (a CPU
compute phase charged the slowdown the target's link test measured on its node's cores takes its time alone from the
sweep's own run of that share on one rank, not from its fitted line; designed on the first four CPU rounds' runs,
heldoutcpu to heldoutcpu4, which are in-sample to it), on four cases chosen before any of them was measured, none used
while designing the model nor in an earlier round (other seeds, sizes and precisions of reduce, matmul, a stencil and
another MLP's training, NumPy on a node's cores).

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried (no cores charged) and from the
target's own, whose cores test ran as many ranks as the target has. Published apart from the in-sample tables, the
earlier CPU rounds and the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "ef4001630a924d41d6fbbc9eeb59a4eef3c44669"
SUITE = "heldoutcpu5"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 256 if quick else 2816
    mlp = mlp_job(env, [4096 if quick else 32768, 448], 433, [448, 896, 448, 10], 128 if quick else 896)
    listed = {
        "reduce, seed 419, float64": (array_job(env, "reduce", [1 << 16 if quick else 7 << 20], 419, "float64"), both),
        f"matmul, {n} square, float32": (array_job(env, "matmul", [n, n], 421), both),
        **stencil_job(env, 160 if quick else 2688, 4 if quick else 14, 431),
        "train, an MLP of 448-896-448-10 at batch 896": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

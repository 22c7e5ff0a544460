"""Held-out validation of ``spmd predict`` on CPUs, eighth round, at 4 and 8 ranks: the model as frozen at FROZEN, the
seventh CPU round's (no model file moved since), on four more cases chosen before any of them was measured, none used
while designing the model nor in an earlier round (other seeds, sizes and precisions of reduce, matmul, a stencil and
another MLP's training, NumPy on a node's cores). No model change was made for it: it measures again, on new cases, what
the seventh measured, so that how often a measured time falls inside its interval rests on twice the cases.

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried (no cores charged) and from the
target's own, whose cores test ran as many ranks as the target has. Published apart from the in-sample tables, the
earlier CPU rounds and the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured: the seventh CPU round's; records of other
# model files are refused
FROZEN = "5384d312b66d9ca71a576e86219993522133cf31"
SUITE = "heldoutcpu8"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 208 if quick else 2560
    mlp = mlp_job(env, [4096 if quick else 32768, 704], 503, [704, 896, 448, 10], 128 if quick else 832)
    listed = {
        "reduce, seed 487, float32": (array_job(env, "reduce", [1 << 16 if quick else 5 << 22], 487), both),
        f"matmul, {n} square, float32": (array_job(env, "matmul", [n, n], 491), both),
        **stencil_job(env, 208 if quick else 2432, 4 if quick else 16, 499),
        "train, an MLP of 704-896-448-10 at batch 832": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

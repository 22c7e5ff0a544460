"""Held-out validation of ``spmd predict`` on CPUs, seventh round, at 4 and 8 ranks: the model as frozen at FROZEN
(the sixth CPU round's, with the sweep's part of an interval carrying the fitted lines' misfit only on what the lines
priced, ``intervals.sweep_part``: compute the target's cores test charged on the sweep's own run of that share keeps
the runs' spread, not the line's miss; designed on the fourth to sixth CPU rounds' runs, which with the first three are
in-sample to it), on four cases chosen before any of them was measured, none used while designing the model nor in an
earlier round (other seeds, sizes and precisions of reduce, matmul, a stencil and another MLP's training, NumPy on a
node's cores).

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried (no cores charged) and from the
target's own, whose cores test ran as many ranks as the target has. What it tests: how often the target's
predictions' narrower intervals hold (the goal 80-97%), and the carried predictions, which the change leaves as they
were, beside them. Published apart from the in-sample tables, the earlier CPU rounds and the GPU rounds
(docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured (the sweep's part of an interval on the
# lines' seconds only); records of other model files are refused
FROZEN = "5384d312b66d9ca71a576e86219993522133cf31"
SUITE = "heldoutcpu7"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 224 if quick else 2176
    mlp = mlp_job(env, [4096 if quick else 32768, 640], 479, [640, 1024, 320, 10], 128 if quick else 960)
    listed = {
        "reduce, seed 461, float64": (array_job(env, "reduce", [1 << 16 if quick else 3 << 21], 461, "float64"), both),
        f"matmul, {n} square, float32": (array_job(env, "matmul", [n, n], 463), both),
        **stencil_job(env, 176 if quick else 2816, 4 if quick else 12, 467),
        "train, an MLP of 640-1024-320-10 at batch 960": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

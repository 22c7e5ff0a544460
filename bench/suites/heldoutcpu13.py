"""Held-out validation of ``spmd predict`` on CPUs, thirteenth round, at 4 and 8 ranks: the model as frozen at FROZEN (a
training step's optimizer priced as a step's work, its time on the sweep's own problem on one rank whatever a rank's
batch, not against the share nor on a smaller batch's share run, whose state its short backward left in caches a
node's ranks at once do not keep: ``phases.PER_STEP_PHASES``; designed on the CPU rounds 1-12, which are in-sample to
it, ``bench.tools.per_step_design``), on four cases chosen before any of them was measured, none used while designing
the model nor in an earlier round (other seeds, sizes and precisions of reduce, matmul, a stencil and another MLP's
training, whose optimizer over about 2.4 million parameters at batch 448 is a large part of a strong step, NumPy on a
node's cores).

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried and from the target's own (the
change moves both). Each case's link tests on 2, 4 and 8 ranks are the round's held-out test of the carried links
themselves (``bench:carried-calls``). Published apart from the in-sample tables, the earlier CPU rounds and the GPU
rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "694af46d82e58404f9410d0f98f2f47443877bf9"
SUITE = "heldoutcpu13"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 224 if quick else 2496
    mlp = mlp_job(env, [4096 if quick else 32768, 768], 653, [768, 1536, 768, 10], 128 if quick else 448)
    listed = {
        "reduce, seed 641, float64": (array_job(env, "reduce", [1 << 16 if quick else 13 << 20], 641, "float64"), both),
        f"matmul, {n} square, float64": (array_job(env, "matmul", [n, n], 643, "float64"), both),
        **stencil_job(env, 176 if quick else 3584, 4 if quick else 6, 647),
        "train, an MLP of 768-1536-768-10 at batch 448": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

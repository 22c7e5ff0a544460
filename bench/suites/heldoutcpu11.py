"""Held-out validation of ``spmd predict`` on CPUs, eleventh round, at 4 and 8 ranks: the model as frozen at FROZEN
(host MPI's collectives carried from the fit's 2-rank link test round by round, a round per doubling of the ranks as
MPI's recursive doubling takes them, not a ring's steps: ``links.mpi_steps``, MPI_STEP_LATENCY_S and
MPI_DOUBLING_BYTES; designed on the link tests of the CPU rounds 1-10, which are in-sample to it,
bench.tools.mpi_steps_design), on four cases chosen before any of them was measured, none used while designing the model
nor in an earlier round (other seeds, sizes and precisions of reduce, matmul, a stencil and another MLP's training,
NumPy on a node's cores).

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried (what the change moves: its
collectives carried by MPI's rounds) and from the target's own. Each case's link tests on 2, 4 and 8 ranks are the
round's held-out test of the carried links themselves (``bench:carried-calls``). Published apart from the in-sample
tables, the earlier CPU rounds and the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "0099870be12ceb5014fa95877d96115c378766a6"
SUITE = "heldoutcpu11"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 192 if quick else 2624
    mlp = mlp_job(env, [4096 if quick else 32768, 448], 593, [448, 1664, 384, 10], 128 if quick else 576)
    listed = {
        "reduce, seed 571, float64": (array_job(env, "reduce", [1 << 16 if quick else 11 << 20], 571, "float64"), both),
        f"matmul, {n} square, float64": (array_job(env, "matmul", [n, n], 577, "float64"), both),
        **stencil_job(env, 208 if quick else 3328, 4 if quick else 8, 587),
        "train, an MLP of 448-1664-384-10 at batch 576": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

"""Held-out validation of ``spmd predict`` on CPUs, twelfth round, at 4 and 8 ranks: the model as frozen at FROZEN (host
MPI's measured curve inside a node read at a call's own bytes a rank, not at the bytes a link carries, so that a call
carried to more ranks keeps the side of the 2-rank curve's cache step its buffers sit on: ``links._measured_ratio``;
designed on the link tests of the CPU rounds 1-11, which are in-sample to it, ``bench.tools.carried_calls``), on four
cases chosen before any of them was measured, none used while designing the model nor in an earlier round (other seeds,
sizes and precisions of reduce, matmul, a stencil and another MLP's training, whose gradients' allreduce of about 8 MiB
a rank lies where the change moves the carried call most, NumPy on a node's cores).

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried (what the change moves) and from
the target's own. Each case's link tests on 2, 4 and 8 ranks are the round's held-out test of the carried links
themselves, the allreduce's and the allgather's (``bench:carried-calls``). Published apart from the in-sample tables,
the earlier CPU rounds and the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "eaf815a9447c8f244d98b9687645797266b7736d"
SUITE = "heldoutcpu12"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 224 if quick else 2752
    mlp = mlp_job(env, [4096 if quick else 32768, 512], 617, [512, 2048, 512, 10], 128 if quick else 640)
    listed = {
        "reduce, seed 601, float32": (array_job(env, "reduce", [1 << 16 if quick else 7 << 22], 601), both),
        f"matmul, {n} square, float32": (array_job(env, "matmul", [n, n], 607), both),
        **stencil_job(env, 192 if quick else 3456, 4 if quick else 7, 613),
        "train, an MLP of 512-2048-512-10 at batch 640": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

"""Held-out validation of ``spmd predict`` on CPUs, tenth round, at 4 and 8 ranks: the model as frozen at FROZEN (where
nothing measured as many CPU ranks on a node as the target puts there, another node's cores test stands in for the
target's and is charged as the target's own would be: the kernels' geometric-mean slowdown on each compute phase's time
alone, their ends in the interval; ``node.STAND_IN_CORES``, ``predict.with_node_cores``; designed on the CPU rounds
4-9, which are in-sample to it, bench.tools.stand_in_design), on four cases chosen before any of them was measured,
none used while designing the model nor in an earlier round (other seeds, sizes and precisions of reduce, matmul, a
stencil and another MLP's training, NumPy on a node's cores).

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried (what the change moves: its test
measured no node's cores beyond the sweep's 2 ranks, so the stand-in is charged) and from the target's own, whose
cores test ran as many ranks as the target has. Published apart from the in-sample tables, the earlier CPU rounds and
the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "4271750081dd1c07e3b01de1030987b3f9218d6f"
SUITE = "heldoutcpu10"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 224 if quick else 2688
    mlp = mlp_job(env, [4096 if quick else 32768, 384], 569, [384, 1792, 512, 10], 128 if quick else 640)
    listed = {
        "reduce, seed 547, float32": (array_job(env, "reduce", [1 << 16 if quick else 3 << 22], 547), both),
        f"matmul, {n} square, float32": (array_job(env, "matmul", [n, n], 557), both),
        **stencil_job(env, 240 if quick else 3200, 4 if quick else 9, 563),
        "train, an MLP of 384-1792-512-10 at batch 640": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

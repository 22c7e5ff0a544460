"""Held-out validation of ``spmd predict`` on CPUs, ninth round, at 4 and 8 ranks: the model as frozen at FROZEN (a
CPU prediction's compute at a share the sweep ran on one rank priced on that run whatever its links, the node term on
top; more CPU ranks on a node than anything measured holding the stored cores tests' median slowdown above its
interval: ``predict.priced_alone``, ``node.unmeasured_cores_seconds``; designed on the CPU rounds 4-8, which are
in-sample to it, bench.tools.carried_design), on four cases chosen before any of them was measured, none used while
designing the model nor in an earlier round (other seeds, sizes and precisions of reduce, matmul, a stencil and another
MLP's training, NumPy on a node's cores).

Each case is fitted, measured and predicted as in the earlier CPU rounds (``heldoutcpu.measure``): fitted with ``spmd
scale --ranks 1,2 --shares 4,8`` in a launch of 2, measured by ``spmd scale --ranks 1,2,4,8`` in one launch of 8,
predicted for 4 and 8 ranks of one node from the fit's own 2-rank link test carried (what the change moves) and from
the target's own, whose cores test ran as many ranks as the target has. Published apart from the in-sample tables, the
earlier CPU rounds and the GPU rounds (docs/validation.md)."""

from __future__ import annotations

from .heldout import array_job, mlp_job, stencil_job
from .heldoutcpu import on_cpus, round_cases

# the prediction model as frozen before any case of this round was measured; records of other model files are refused
FROZEN = "a49c84a3f2df637834be5cec838f83c33266b6d9"
SUITE = "heldoutcpu9"


def cases_list(env) -> dict:
    """name -> (the job's config, its modes): the round's list, fixed before any of it was measured (``env.quick``:
    a smoke run's sizes, for the suite's own tests)."""
    quick = env.quick
    both = ("strong", "weak")
    n = 240 if quick else 2304
    mlp = mlp_job(env, [4096 if quick else 32768, 512], 541, [512, 1536, 384, 10], 128 if quick else 704)
    listed = {
        "reduce, seed 509, float64": (array_job(env, "reduce", [1 << 16 if quick else 5 << 21], 509, "float64"), both),
        f"matmul, {n} square, float64": (array_job(env, "matmul", [n, n], 521, "float64"), both),
        **stencil_job(env, 160 if quick else 2560, 4 if quick else 14, 523),
        "train, an MLP of 512-1536-384-10 at batch 704": (mlp, both),
    }  # fmt: skip
    return on_cpus(listed, quick)


def cases(env):
    return round_cases(cases_list(env), SUITE, FROZEN)

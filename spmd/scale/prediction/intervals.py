"""How sure a prediction of ``predict`` is: its interval's parts.

Each prediction carries an interval of three parts, added in quadrature (``interval_parts``). The sweep's part is the
fitted runs' own measurement intervals, for the local part, and the model's misfit at them, for what its fitted lines
priced (not a compute phase priced on the sweep's own run of that share, ``sweep_part``). The links' part is the link
fit's misfit to its measured sizes, for the collectives (a preset's looked-up figures carry none, and the table says
so). A launch's part is LAUNCH_SPREAD of the whole, since the launch a sweep was fitted in is not the target's. A
predicted speedup compares two runs of one launch, so its interval (``speedup_interval``) leaves the launch's part out.
The model's own error out of sample is a part of each side (``model_below``, ``model_above``: MODEL_SPREAD of the
whole), added in quadrature to the time's and the speedup's. A sweep fitted on one rank never saw what ranks do to each
other, so its predictions at several carry it from held-out cases that did (``unseen_seconds``): each halo call's host
cost and training ranks waiting for each other's host in the allreduce, their median added to the prediction (the
row's ``unseen_s``, a part of its own) and their spread about it to the interval, a last part (``unseen_below``,
``unseen_above``). Where a compute phase's node term is held beyond the ranks its node was measured with, what growing
on would add is the top's own part (the row's ``node_beyond_s``, ``node.node_beyond_seconds``); where the
target's cores test (or another node's, standing in for it) charged it instead, the least and the most slowed kernel's
are the ends' own parts (the row's ``cores_below_s`` and ``cores_above_s``, ``node.cores_seconds``).
"""

from __future__ import annotations

import math

# a whole launch's time against another launch's of the same case (the fit's launch against the target's): within this
# share in 90% of the pairs (the predict suite's committed cases of several launches, on 2 and 4 H200s and the 2-core
# CPU, and the first two held-out rounds'; bench.suites.predict.launch_deviations, held to it by
# tests/unit/test_suites_predict.py)
LAUNCH_SPREAD = 0.13
# The model's own error out of sample, below and above the prediction, as a share of its time: what the held-out rounds'
# measured speedups (one launch's runs against each other: the launch's speed cancels) still lay outside the sweep's,
# the links' and the unseen parts, each side, their 95th percentile (the stored rounds 1-6 on 2 H200s and the second's
# 4-GPU rows, predicted again by the model as it is: bench.suites.heldout.spread_design, held to it by
# tests/unit/test_suites_heldout.py). Above is the wider side: a prediction missed mostly by being too fast.
MODEL_SPREAD = (0.13, 0.39)
# What a sweep fitted on one rank never saw of its job at several: a halo call's host cost (the exchange and the edge
# strips' kernels a split adds, each iteration, from a host that may already bound the GPU) and a training step's
# share spent waiting in the allreduce for the other ranks' hosts: the host's, not the links'. From the held-out rounds
# 1-4, fitted on one GPU and measured on 2 H200s (bench.suites.heldout.unseen_design, held to it by
# tests/unit/test_suites_heldout.py): the median of how far each measured time lay from its prediction without them
# (per halo call, or as a share of the step) is added to the prediction; the 95th percentile of how far the measured
# times still lay below and above the interval's other three parts, each side, is its fourth part (below, above).
HALO_CALL_S = 46e-6
HALO_SPREAD_S = (16e-6, 20e-6)
COUPLING = 0.08
COUPLING_SPREAD = (0.0, 0.10)


def local_uncertainty(scaling: dict, model: dict) -> tuple[float, float]:
    """(measured, misfit): the relative uncertainty of a predicted local part, in two parts. The widest relative
    interval of the runs fitted, for every local second; where the model has points beyond its parameters, its largest
    misfit at them, for the seconds priced on its fitted lines only (``sweep_part``)."""
    widths = [
        (row["time_interval"][1] - row["time_interval"][0]) / 2 / row["time"]
        for series in scaling["series"].values()
        for row in series
        if row.get("time_interval") and row["time"] > 0
    ]
    misfit = max((abs(p["error"]) for p in model.get("points", []) if p["fitted"]), default=0.0)
    # a training sweep's step model, where it missed its own points by more than the array model did
    steps = ((scaling.get("batch_sweep") or {}).get("model") or {}).get("points") or []
    batch_misfit = max((abs(p["error"]) for p in steps), default=0.0)
    return max(widths, default=0.0), max(misfit if model.get("validated") else 0.0, batch_misfit)


def sweep_part(uncertainty: tuple[float, float], local_s: float, measured_s: float) -> float:
    """The sweep's part of a prediction's interval, in seconds: the runs' own spread on all of its ``local_s`` and the
    fitted lines' misfit on what they priced, all but the ``measured_s`` taken from the sweep's own run of that share
    (a CPU stencil's small share, cached, missed its line by 2x; a prediction priced on that run's measurement does
    not carry the miss)."""
    measured, misfit = uncertainty
    return math.hypot(measured * local_s, misfit * max(local_s - measured_s, 0.0))


def link_misfit(link) -> float:
    """A level's largest relative misfit to its measured sizes (none where the level is absent)."""
    return link.misfit if link else 0.0


def speedup_range(speedup: float | None, total: float, below: float, above: float) -> list | None:
    """A predicted speedup's interval from what may lie ``below`` and ``above`` its time of ``total`` seconds (no
    upper end where the time could reach zero)."""
    if speedup is None:
        return None
    low = total - below
    return [speedup * total / (total + above), speedup * total / low if low > 0 else None]


def sides(parts: list[float], total: float) -> tuple[float, float]:
    """(below, above): the quadrature of ``parts`` (seconds) with the model's own error out of sample on each side
    (MODEL_SPREAD of the ``total``)."""
    return tuple(math.hypot(*parts, share * total) for share in MODEL_SPREAD)


def unseen_terms(scaling: dict, model: dict) -> dict | None:
    """What a sweep fitted on one rank never saw of its job at several: {'halo_calls' a repeat, 'training'}; None
    where it ran on several ranks."""
    if max((r["ranks"] for r in scaling["runs"]), default=1) > 1:
        return None
    ops = (model.get("comm") or {}).get("ops") or []
    halo_calls = sum(o.get("calls", 1) for o in ops if o.get("op") == "sendrecv")
    return {"halo_calls": halo_calls, "training": bool(scaling.get("training"))}


def unseen_note(unseen: dict) -> str:
    """The report's word on what a one-rank fit's predictions at several carry, naming only what is charged."""
    named = []
    if unseen["halo_calls"]:
        named.append(
            f"{unseen['halo_calls']} halo calls a repeat at {HALO_CALL_S * 1e6:.0f} us each (their host cost, "
            f"{HALO_SPREAD_S[0] * 1e6:.0f} us below to {HALO_SPREAD_S[1] * 1e6:.0f} us above)"
        )
    if unseen["training"]:
        named.append(
            f"{COUPLING:.0%} of a step (the ranks' wait for each other's host in the allreduce, "
            f"{COUPLING_SPREAD[0]:.0%} below to {COUPLING_SPREAD[1]:.0%} above)"
        )
    return (
        "fitted on one rank: what ranks do to each other was never measured; added to each prediction (unseen), "
        f"{' and '.join(named)}: the median of held-out cases fitted on one GPU, their spread in the interval; a sweep "
        "over 2 GPUs (spmd scale --ranks 1,2) measures it"
    )


def unseen_seconds(scaling: dict, model: dict, ranks: int, total: float) -> tuple[float, float, float]:
    """(added, below, above): the seconds a sweep fitted on one rank never saw of a prediction of ``total`` at
    ``ranks`` (all 0 where it ran on several): its halo calls' host cost and, training, the ranks' wait for each other
    in the allreduce; their median added to the prediction, their spread about it below and above."""
    unseen = unseen_terms(scaling, model)
    if ranks < 2 or not unseen:
        return 0.0, 0.0, 0.0
    calls, step = unseen["halo_calls"], total if unseen["training"] else 0.0
    return (
        HALO_CALL_S * calls + COUPLING * step,
        HALO_SPREAD_S[0] * calls + COUPLING_SPREAD[0] * step,
        HALO_SPREAD_S[1] * calls + COUPLING_SPREAD[1] * step,
    )

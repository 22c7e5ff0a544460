"""How sure a prediction of ``predict`` is: its interval's parts.

Each prediction carries an interval of three parts, added in quadrature (``interval_parts``). The sweep's part is the
fitted runs' own measurement intervals and the model's misfit at them, for the local part. The links' part is the link
fit's misfit to its measured sizes, for the collectives (a preset's nominal figures carry none, and the table says
so). A launch's part is LAUNCH_SPREAD of the whole, since the launch a sweep was fitted in is not the target's. A
predicted speedup compares two runs of one launch, so its interval (``speedup_interval``) leaves the launch's part out.
A sweep fitted on one rank never saw what ranks do to each other, so its predictions at several carry a fourth part,
on the upper side only (``unseen_above``): each halo call's host cost, and training ranks waiting for each other's host
in the allreduce.
"""

from __future__ import annotations

import math

# a whole launch's time against another launch's of the same case (the fit's launch against the target's): within this
# share in 90% of the pairs (the predict suite's committed cases of several launches, on 2 and 4 H200s and the 2-core
# CPU, and the first two held-out rounds'; bench.suites.predict.launch_deviations, held to it by
# tests/unit/test_suites_predict.py)
LAUNCH_SPREAD = 0.13
# What a sweep fitted on one rank never saw, above its prediction at several: a halo call's host cost (the exchange
# and the edge strips' kernels a split adds, each iteration, from a host that may already bound the GPU), and a
# training step's share spent waiting in the allreduce for the other ranks' hosts. Each the 90th percentile of how far
# the measured times of the held-out rounds 1-3 lay above their intervals (per halo call, or as a share of the step),
# the fits that listed their halos and the training jobs, all fitted on one GPU and measured on 2 H200s
# (bench.suites.heldout.unseen_excess, held to it by tests/unit/test_suites_heldout.py): the host's, not the links'
HALO_HOST_S = 50e-6
COUPLING = 0.17


def local_uncertainty(scaling: dict, model: dict) -> float:
    """The relative uncertainty of a predicted local part: the widest relative interval of the runs fitted and,
    where the model has points beyond its parameters, its largest misfit at them."""
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
    return math.hypot(max(widths, default=0.0), max(misfit if model.get("validated") else 0.0, batch_misfit))


def link_misfit(link) -> float:
    """A level's largest relative misfit to its measured sizes (none where the level is absent)."""
    return link.misfit if link else 0.0


def speedup_range(speedup: float | None, total: float, half: float, above: float = 0.0) -> list | None:
    """A predicted speedup's interval from its time's ``half``-width and what may lie ``above`` it (no upper end where
    the time's interval reaches zero)."""
    if speedup is None:
        return None
    return [speedup * total / (total + half + above), speedup * total / (total - half) if total > half else None]


def unseen_terms(scaling: dict, model: dict) -> dict | None:
    """What a sweep fitted on one rank never saw of its job at several: {'halo_calls' a repeat, 'training'}; None
    where it ran on several ranks."""
    if max((r["ranks"] for r in scaling["runs"]), default=1) > 1:
        return None
    ops = (model.get("comm") or {}).get("ops") or []
    halo_calls = sum(o.get("calls", 1) for o in ops if o.get("op") == "sendrecv")
    return {"halo_calls": halo_calls, "training": bool(scaling.get("training"))}


def unseen_note(unseen: dict) -> str:
    """The report's word on what a one-rank fit's intervals carry above them, naming only what is charged."""
    named = []
    if unseen["halo_calls"]:
        named.append(f"{unseen['halo_calls']} halo calls a repeat at {HALO_HOST_S * 1e6:.0f} us each (their host cost)")
    if unseen["training"]:
        named.append(f"{COUPLING:.0%} of a step (the ranks' wait for each other's host in the allreduce)")
    return (
        "fitted on one rank: what ranks do to each other was never measured; above each interval, "
        f"{' and '.join(named)}, as far as held-out cases fitted on one GPU lay above theirs; a sweep over 2 GPUs "
        "(spmd scale --ranks 1,2) measures it"
    )


def unseen_above(scaling: dict, model: dict, ranks: int, total: float) -> float:
    """Seconds above a prediction of ``total`` at ``ranks`` that a sweep fitted on one rank never saw (0 where it ran
    on several): its halo calls' host cost and, training, the ranks' wait for each other in the allreduce."""
    unseen = unseen_terms(scaling, model)
    if ranks < 2 or not unseen:
        return 0.0
    return HALO_HOST_S * unseen["halo_calls"] + (COUPLING * total if unseen["training"] else 0.0)

"""How a phase's node term (what each further rank on a node adds per byte, spmd.scale.models.scaling_model.fit_local)
moves stored predictions, in-sample: the model as it is (the term as the points of equal bytes per rank show it, a
compute phase's growth held beyond the ranks a node was measured with and a host phase's carried on), the term fitted
by least squares over every point with the rest (the model before it), every phase's growth carried on linearly, both
(the model before it, whole), and every phase's growth held, a host's reads too. Each folder's records are derived
again (bench recheck, in a copy) under each; per folder and variant: the mean and worst |error| (each record's median
run), how many runs' measured times fell inside their intervals, and the mean |error| per workload. The design
evidence of the node term.

    python -m bench.tools.node_term docs/results/cpu-16core/heldoutcpu docs/results/h200x4/predict \
        docs/results/h200x2/predict docs/results/h200x4/heldout2
"""

import argparse
import statistics
from pathlib import Path

import numpy as np

from bench.tools.heldout_inputs import derived_records, workload_of
from spmd.scale.models import scaling_model as sm

_fit_local = sm.fit_local  # the model's own, before a variant replaces it


def least_squares_fit_local(xs: list[float], ys: list[float], node_ranks: list[int] | None = None) -> dict:
    """fit_local with the node term fitted by least squares over every point with the rest, in relative error and
    never negative (the model before the term was the pair's growth)."""
    plain = _fit_local(xs, ys)
    if node_ranks is None:
        return plain
    x, y, k = (np.asarray(v, float) for v in (xs, ys, node_ranks))
    same = np.round(x, 6)
    if not any(len(np.unique(k[same == share])) > 1 for share in np.unique(same)) or not (y > 0).all():
        return plain  # no pair of equal bytes at two counts on a node
    a, b, c = sm.nonnegative_lstsq([np.ones_like(x), x, x * (k - 1)], y)
    fitted = a + b * x + c * x * (k - 1)
    if c <= 0 or not (c * x * (k - 1) >= sm.NODE_TERM_MIN_SHARE * fitted).any():
        return plain
    kind = "affine" if a > 0 else "proportional"
    return {
        **plain,
        "intercept_s": a,
        "seconds_per_byte": b,
        "rate_Bps": 1 / b if b > 0 else None,
        "node_seconds_per_byte": c,
        "node_ranks_measured": int(k.max()),
        "fit": f"{kind} + node",
    }


def carried_on(phase: str, fit: dict, node_ranks: int) -> int:
    """node_growth with every phase's growth carried on linearly beyond the ranks its node was measured with."""
    return node_ranks - 1


def held_everywhere(phase: str, fit: dict, node_ranks: int) -> int:
    """node_growth with a host phase's growth held too, beyond the ranks its node was measured with."""
    return min(node_ranks, fit.get("node_ranks_measured") or node_ranks) - 1


LEAST_SQUARES = ((sm, "fit_local", least_squares_fit_local),)
LINEAR = ((sm, "node_growth", carried_on),)
HELD = ((sm, "node_growth", held_everywhere),)
VARIANTS = {
    "the model: the pair's growth, compute held": (),
    "least squares, compute held": LEAST_SQUARES,
    "the pair's growth, carried on": LINEAR,
    "least squares, carried on (the model before)": LEAST_SQUARES + LINEAR,
    "the pair's growth, every phase held": HELD,
}


def derived(folder: Path, patches: tuple) -> str:
    """The folder's records derived again (a copy) under ``patches``: mean, worst, inside; mean per workload."""
    records = derived_records(folder, patches)
    errors = [statistics.median(r.values) for r in records]
    runs = [p for r in records for p in (r.params.get("runs") or [r.params])]
    inside = sum(p["interval"][0] <= p["measured_s"] <= p["interval"][1] for p in runs)
    workloads: dict[str, list[float]] = {}
    for r, e in zip(records, errors):
        workloads.setdefault(workload_of(r), []).append(e)
    per = ", ".join(f"{w} {statistics.mean(v):.1%}" for w, v in workloads.items())
    return f"{statistics.mean(errors):.1%}, worst {max(errors):.1%}, {inside} of {len(runs)} inside; {per}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    folders = parser.parse_args().folders
    print("| records of | node term | mean, worst, times inside; mean per workload |")
    print("|---|---|---|")
    for folder in folders:
        for label, patches in VARIANTS.items():
            print(f"| {folder.parent.name}/{folder.name} | {label} | {derived(folder, patches)} |")


if __name__ == "__main__":
    main()

"""How a phase's node term (what each further rank on a node adds per byte, spmd.scale.models.scaling_model.fit_local)
moves stored predictions, in-sample: the model as it is (the term fitted by least squares with the rest), the term
as the points of equal bytes per rank show it (their growth per further rank, the rest fitted to the times less it),
and either held, beyond the ranks a node was measured with, at the growth measured there instead of carried linearly.
Each folder's records are derived again (bench recheck, in a copy) under each; per folder and variant: the mean and
worst |error| (each record's median run), how many runs' measured times fell inside their intervals, and the mean
|error| per workload. Design evidence for a later model, not a model: nothing here is frozen.

    python -m bench.tools.node_term docs/results/cpu-16core/heldoutcpu docs/results/h200x4/predict \
        docs/results/h200x2/predict docs/results/h200x4/heldout2
"""

import argparse
import contextlib
import shutil
import statistics
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np

from bench.records import read_records
from bench.suites.predict import recheck
from spmd.scale.decision import advice
from spmd.scale.models import scaling_model as sm
from spmd.scale.prediction import predict as prediction
from spmd.scale.sweep import analysis

_predict, _fit_local = sm.predict, sm.fit_local  # the model's own, before a variant replaces them


def pair_growth_fit_local(xs: list[float], ys: list[float], node_ranks: list[int] | None = None) -> dict:
    """fit_local with the node term as the points of equal bytes per rank show it: per such share the slope of its
    times against ``x (k - 1)``, their median (never negative); the rest fitted (fit_local without ranks) to the times
    less it."""
    plain = _fit_local(xs, ys)
    if node_ranks is None:
        return plain
    x, y, k = (np.asarray(v, float) for v in (xs, ys, node_ranks))
    slopes = []
    for share in np.unique(np.round(x, 6)):
        same = np.round(x, 6) == share
        if len(np.unique(k[same])) > 1:
            slopes.append(float(np.polyfit(x[same] * (k[same] - 1), y[same], 1)[0]))
    if not slopes or not (y > 0).all():
        return plain
    c = max(0.0, float(np.median(slopes)))
    rest = _fit_local(list(x), list(y - c * x * (k - 1)))
    fitted = rest["intercept_s"] + rest["seconds_per_byte"] * x + c * x * (k - 1)
    if c <= 0 or not (c * x * (k - 1) >= sm.NODE_TERM_MIN_SHARE * fitted).any():
        return plain
    return {**rest, "node_seconds_per_byte": c, "node_ranks_measured": int(k.max())}


def held_growth_predict(model: dict, ranks: int, problem_bytes: float, node_ranks: int | None = None, *rest, **kw):
    """predict with each phase's node growth held, beyond the ranks a node was measured with, at what it was there."""
    k = node_ranks or sm.ranks_on_a_node(model, ranks)
    local = {}
    for phase, fit in model.get("local", {}).items():
        measured = fit.get("node_ranks_measured", k)
        if "node_seconds_per_byte" in fit and k > measured:
            fit = {**fit, "node_seconds_per_byte": fit["node_seconds_per_byte"] * (measured - 1) / (k - 1)}
        local[phase] = fit
    return _predict({**model, "local": local}, ranks, problem_bytes, k, *rest, **kw)


PAIR = ((sm, "fit_local", pair_growth_fit_local),)
# every module that prices a model by name (imported as ``from ..models.scaling_model import predict``)
HELD = tuple((module, "predict", held_growth_predict) for module in (sm, prediction, analysis, advice))
VARIANTS = {
    "least squares (the model)": (),
    "the pair's growth": PAIR,
    "least squares, held": HELD,
    "the pair's growth, held": PAIR + HELD,
}


def derived(folder: Path, patches: tuple) -> str:
    """The folder's records derived again (a copy) under ``patches``: mean, worst, inside; mean per workload."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        for module, name, new in patches:
            stack.enter_context(mock.patch.object(module, name, new))
        copy = Path(shutil.copytree(folder, Path(tmp) / folder.name))
        recheck(copy)
        records = read_records(copy / "records.jsonl")
    errors = [statistics.median(r.values) for r in records]
    runs = [p for r in records for p in (r.params.get("runs") or [r.params])]
    inside = sum(p["interval"][0] <= p["measured_s"] <= p["interval"][1] for p in runs)
    workloads: dict[str, list[float]] = {}
    for r, e in zip(records, errors):
        workloads.setdefault(r.case.removeprefix("held-out ").split(",")[0].split()[0], []).append(e)
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

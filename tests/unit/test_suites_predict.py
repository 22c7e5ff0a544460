"""The predict suite's records over several runs: each run's check kept, the median run's shown, and every run
derived again from its own inputs by ``bench recheck``."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import git_repo, recorded_prediction
from hypothesis import given
from hypothesis import strategies as st

from bench.records import Measure, collect, read_records, rewrite_records, write_records
from bench.suites.predict import checked, recheck, runs_of

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
TARGET = "gpus_per_node=4,name=same links"


def test_several_runs_keep_each_runs_check_and_show_the_median_run():
    errors = [0.30, 0.10, 0.20]  # run 3 holds the median error

    def measure(run):
        params = {
            "error": errors[run],
            "measured_s": 1.0 + run,
            "inputs": {"fit": f"inputs/x-run{run + 1}-fit.json.gz"},
        }
        return [Measure("c", "spmd predict", errors[run], "error of the prediction", "share", params=params)]

    (record,) = collect("predict", runs_of(measure, 3), "case")
    assert record.values == errors
    assert record.params["measured_s"] == 3.0 and record.params["error"] == 0.20
    assert [r["measured_s"] for r in record.params["runs"]] == [1.0, 2.0, 3.0]
    assert [r["inputs"]["fit"] for r in record.params["runs"]][1] == "inputs/x-run2-fit.json.gz"


def _suite_folder(tmp_path: Path, runs: int) -> Path:
    folder = tmp_path / "predict"
    (folder / "inputs").mkdir(parents=True)
    for run in range(runs):
        for role in ("fit", "measured", "links"):
            name = f"stencil-{run}-{role}.json.gz"
            shutil.copy(DATA / f"stencil-h200x4-nvlink-{role}.json.gz", folder / "inputs" / name)
    (folder / "manifest.json").write_text(json.dumps({"suite": "predict", "spmd_version": "0"}))
    return folder


def test_recheck_derives_every_run_again_from_its_own_inputs_and_keeps_what_the_model_does_not(tmp_path):
    folder = _suite_folder(tmp_path, 3)
    (truth,) = [
        c for c in checked(recorded_prediction(tmp_path, "stencil-h200x4-nvlink"), TARGET) if c["mode"] == "strong"
    ]
    stale = {"mode": "strong", "ranks": 4, "error": 0.9, "target": TARGET, "comm_share": 0.4}
    runs = [
        {**stale, "inputs": {r: f"inputs/stencil-{k}-{r}.json.gz" for r in ("fit", "measured", "links")}}
        for k in range(3)
    ]
    several = Measure(
        "stencil strong", "spmd predict", 0.9, "error of the prediction", "share", params={**runs[0], "runs": runs}
    )
    no_inputs = Measure("old", "spmd predict", 0.5, "error of the prediction", "share", params={"error": 0.5})
    write_records(folder / "records.jsonl", collect("predict", [[several, no_inputs]] * 3, "case"))

    assert recheck(folder) == 1
    fresh, old = read_records(folder / "records.jsonl")
    assert fresh.values == [pytest.approx(abs(truth["error"]))] * 3
    assert fresh.params["error"] == pytest.approx(truth["error"]) and fresh.params["comm_share"] == 0.4
    assert [r["inputs"]["fit"] for r in fresh.params["runs"]] == [f"inputs/stencil-{k}-fit.json.gz" for k in range(3)]
    assert all(r["target"] == TARGET and "runs" not in r for r in fresh.params["runs"])
    assert old.values == [0.5] * 3 and old.params == {"error": 0.5}  # nothing to derive it from: as it was
    assert json.loads((folder / "manifest.json").read_text())["rechecked"][-1]["records"] == 1


def _device_folder(
    tmp_path: Path,
    name: str,
    case: str,
    error: float,
    runs: int = 1,
    commit: str = "c1",
    roles: tuple = ("fit", "measured", "links"),
) -> Path:
    """A predict suite's folder as ``bench run --only CASE`` writes it on the GPU machine: one record of ``case``
    with its inputs of ``roles`` (the same names every call gives them)."""
    folder = tmp_path / name
    (folder / "inputs").mkdir(parents=True)
    inputs = {role: f"inputs/x-p2p-off-{role}.json.gz" for role in roles}
    for rel in inputs.values():
        (folder / rel).write_bytes(f"{name} {rel}".encode())
    params = {"error": error, "measured_s": error, "inputs": inputs, "target": TARGET}
    measures = [
        [Measure("x at 2: p2p off", "spmd predict", abs(error), "error of the prediction", "share", params=params)]
    ] * runs
    write_records(folder / "records.jsonl", collect("predict", measures, case))
    entry = {
        "case": case,
        "command": f"bench run predict --only '{case}' --out {name}",
        "commit": commit,
        "records": 1,
        "seconds": 9.0,
    }
    manifest = {
        "suite": "predict",
        "commit": commit,
        "changes": [],
        "tree": "t",
        "date": f"2026-11-28T0{len(name)}:00:00",
    }
    (folder / "manifest.json").write_text(json.dumps({**manifest, "command": entry["command"], "cases": [entry]}))
    return folder


def test_merge_replaces_a_case_or_adds_its_runs_keeping_every_runs_inputs(tmp_path):
    from bench.merge import merge

    dst = _device_folder(tmp_path, "docs", "x on other links", 0.30)
    other = _device_folder(tmp_path, "other", "y on other links", 0.05)
    shutil.copy(other / "records.jsonl", tmp_path / "y.jsonl")
    with open(dst / "records.jsonl", "a") as f:  # a second case whose records and inputs stay as they are
        f.write((tmp_path / "y.jsonl").read_text().replace("x-p2p-off", "y-p2p-off"))
    (dst / "inputs" / "y-p2p-off-fit.json.gz").write_bytes(b"y")
    (dst / "inputs" / "stale-fit.json.gz").write_bytes(b"no record names it")

    # further runs, from two later calls: each call's inputs carry the same names as the first's
    merge(_device_folder(tmp_path, "call2", "x on other links", -0.10, commit="c2"), dst, add_runs=True)
    merge(_device_folder(tmp_path, "call33", "x on other links", 0.20, commit="c3"), dst, add_runs=True)
    x, y = read_records(dst / "records.jsonl")
    assert x.values == [0.30, 0.10, 0.20] and y.values == [0.05]
    assert x.params["error"] == 0.20  # the median run's row
    fits = [r["inputs"]["fit"] for r in x.params["runs"]]
    assert fits == [
        "inputs/x-p2p-off-fit.json.gz",
        "inputs/x-p2p-off-run2-fit.json.gz",
        "inputs/x-p2p-off-run3-fit.json.gz",
    ]
    assert [(dst / f).read_bytes() for f in fits] == [
        f"{n} inputs/x-p2p-off-fit.json.gz".encode() for n in ("docs", "call2", "call33")
    ]
    assert not (dst / "inputs" / "stale-fit.json.gz").exists() and (dst / "inputs" / "y-p2p-off-fit.json.gz").exists()
    entry = json.loads((dst / "manifest.json").read_text())["cases"][0]
    assert entry["commit"] == "c3" and [e["commit"] for e in entry["earlier"]] == ["c1", "c2"]
    x_runs = [f"bench run predict --only 'x on other links' --out {n}" for n in ("docs", "call2", "call33")]
    assert json.loads((dst / "manifest.json").read_text())["commands"] == x_runs

    # measured again from scratch: the case's runs and inputs replaced, the other case's kept
    merge(_device_folder(tmp_path, "again", "x on other links", 0.01, commit="c4"), dst)
    x, y = read_records(dst / "records.jsonl")
    assert x.values == [0.01] and "runs" not in x.params and y.values == [0.05]
    assert sorted(p.name for p in (dst / "inputs").iterdir()) == [
        "x-p2p-off-fit.json.gz",
        "x-p2p-off-links.json.gz",
        "x-p2p-off-measured.json.gz",
        "y-p2p-off-fit.json.gz",
    ]
    manifest = json.loads((dst / "manifest.json").read_text())
    assert manifest["cases"][0]["commit"] == "c4" and "earlier" not in manifest["cases"][0]
    assert manifest["commands"] == ["bench run predict --only 'x on other links' --out again"]  # the old runs' went


def test_runs_added_keep_a_predictions_files_together_whatever_its_roles_names(tmp_path):
    """Roles with hyphens and digits (the CPU round's ``links-fit``, ``links-4``): a later call's files of one
    prediction are renamed together to the next free ``-runK``, each record's inputs naming its own call's bytes."""
    from bench.merge import merge

    roles = ("fit", "measured", "links-fit", "links-4")
    dst = _device_folder(tmp_path, "docs", "x on other links", 0.30, roles=roles)
    merge(_device_folder(tmp_path, "call2", "x on other links", 0.10, commit="c2", roles=roles), dst, add_runs=True)
    merge(_device_folder(tmp_path, "call33", "x on other links", 0.20, commit="c3", roles=roles), dst, add_runs=True)
    (x,) = read_records(dst / "records.jsonl")
    assert x.values == [0.30, 0.10, 0.20]
    for k, (run, call) in enumerate(zip(x.params["runs"], ("docs", "call2", "call33")), start=1):
        stem = "x-p2p-off" if k == 1 else f"x-p2p-off-run{k}"
        assert run["inputs"] == {role: f"inputs/{stem}-{role}.json.gz" for role in roles}
        for role, path in run["inputs"].items():
            assert (dst / path).read_bytes() == f"{call} inputs/x-p2p-off-{role}.json.gz".encode()
    assert len(list((dst / "inputs").iterdir())) == 3 * len(roles)


def test_runs_added_to_a_run_without_inputs_keep_their_own_params_and_inputs(tmp_path):
    """A case first measured before it kept any evidence, then again with its inputs: every run's params stay, and
    the later runs' files come along."""
    from bench.merge import merge

    dst = _device_folder(tmp_path, "docs", "x on other links", 0.30)
    (record,) = read_records(dst / "records.jsonl")
    record.params = {"error": 0.30}  # measured before the case kept its inputs
    rewrite_records(dst / "records.jsonl", [record])
    merge(_device_folder(tmp_path, "call2", "x on other links", 0.10, commit="c2"), dst, add_runs=True)
    (x,) = read_records(dst / "records.jsonl")
    assert [p.get("inputs", {}).get("fit") for p in x.params["runs"]] == [None, "inputs/x-p2p-off-fit.json.gz"]
    assert (dst / "inputs" / "x-p2p-off-fit.json.gz").read_bytes() == b"call2 inputs/x-p2p-off-fit.json.gz"


def test_merge_credits_the_commit_whose_tree_ran_and_refuses_a_tree_no_commit_has(tmp_path):
    from bench.merge import ran_commit
    from spmd.core.errors import InputError

    git = git_repo(tmp_path)
    (tmp_path / "a.py").write_text("1\n")
    git("add", "-A")
    git("commit", "-qm", "one")
    first = git("rev-parse", "HEAD")
    (tmp_path / "a.py").write_text("2\n")
    git("commit", "-qam", "two")
    second, tree = git("rev-parse", "HEAD"), git("rev-parse", "HEAD^{tree}")
    # the device's HEAD said the first commit, its files were the second's
    assert ran_commit({"commit": first, "changes": [" M a.py"], "tree": tree}, tmp_path) == second
    assert ran_commit({"commit": first, "changes": []}, tmp_path) == first
    with pytest.raises(InputError, match="commit the code that ran"):
        ran_commit({"commit": first, "changes": [" M a.py"], "tree": "0" * 40}, tmp_path)


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs/results"


PREDICTING = sorted(str(p.parent.relative_to(RESULTS)) for p in RESULTS.glob("*/predict/records.jsonl"))
HELD_OUT = sorted(str(p.parent.relative_to(RESULTS)) for p in RESULTS.glob("*/heldout*/records.jsonl"))


@pytest.mark.parametrize("where", PREDICTING)
def test_every_committed_prediction_is_what_todays_model_derives_from_its_stored_inputs(tmp_path, where):
    """A committed predict folder, rechecked in a copy: no figure moves (a model changed since its records were
    derived fails here until ``python -m bench recheck`` derives them again and they are committed)."""
    folder = shutil.copytree(RESULTS / where, tmp_path / "predict")
    committed = read_records(folder / "records.jsonl")
    derived = recheck(folder)
    again = read_records(folder / "records.jsonl")
    assert [r.case for r in again] == [r.case for r in committed]
    for old, new in zip(committed, again):
        assert new.values == pytest.approx(old.values, rel=1e-9, abs=1e-12), old.case
    last = json.loads((folder / "manifest.json").read_text())["rechecked"][-1]
    assert (last["records"], last["of"]) == (derived, len(committed))
    stored = json.loads((RESULTS / where / "manifest.json").read_text()).get("rechecked") or []
    if derived:  # the committed manifest says how many of its records the last recheck derived
        assert stored and stored[-1].get("of") == len(committed) and stored[-1]["records"] == derived, stored[-1:]


@pytest.mark.parametrize("where", HELD_OUT)
def test_every_held_out_figure_is_what_its_frozen_model_derives_from_its_stored_inputs(tmp_path, where):
    """A held-out folder's figures belong to the model frozen before it was measured, not to today's (a later
    model is tested by new held-out cases): each folder is derived again in a copy by ``bench recheck`` as it was
    at the commit its records name as frozen (a clone of this repository there), and no figure moves."""
    folder = shutil.copytree(RESULTS / where, tmp_path / "heldout")
    committed = read_records(folder / "records.jsonl")
    (frozen,) = {r.params["frozen"] for r in committed}
    code = tmp_path / "code"
    git = ("git", "-c", "advice.detachedHead=false")
    subprocess.run([*git, "clone", "-q", "--shared", "--no-checkout", str(ROOT), str(code)], check=True)
    subprocess.run([*git, "-C", str(code), "checkout", "-q", frozen], check=True)
    env = {**os.environ, "PYTHONPATH": str(code)}
    run = [sys.executable, "-m", "bench", "recheck", str(folder)]
    done = subprocess.run(run, cwd=code, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    again = read_records(folder / "records.jsonl")
    assert [r.case for r in again] == [r.case for r in committed]
    assert all(r.params.get("inputs") for r in committed)  # every record derived, none kept as it was
    for old, new in zip(committed, again):
        assert new.values == pytest.approx(old.values, rel=1e-9, abs=1e-12), old.case


def test_provenance_names_how_many_records_were_derived_again_and_keeps_the_changes_mark():
    from bench.report import provenance

    m = {"commit": "a" * 40, "date": "2026-11-29T00:00:00"}
    again = {"commit": "b" * 40 + "+changes", "date": "2026-11-30T00:00:00", "records": 3, "of": 5}
    assert provenance({**m, "rechecked": [again]}).endswith(
        f"; 3 of 5 records derived again from the measured inputs at `{'b' * 12}+changes` (2026-11-30)"
    )
    none = provenance({**m, "rechecked": [{**again, "records": 0}]})
    assert "derived none of its 5 records again" in none and "from the measured inputs" not in none


def test_interval_coverage_counts_every_run_and_gives_its_binomial_interval():
    from bench.report import interval_coverage, wilson

    def record(*runs):
        params = [{"interval": [lo, hi], "measured_s": m} for lo, hi, m in runs]
        return Measure("c", "spmd predict", 0.1, "error", "share", params={**params[0], "runs": params})

    records = [record((1, 2, 1.5), (1, 2, 2.5)), record((1, 2, 0.5))]
    low, high = wilson(1, 3)
    assert interval_coverage(records) == f"1 of 3 ({100 * low:.0f} - {100 * high:.0f}%, Wilson 95% interval)"
    assert (
        wilson(0, 10)[0] == 0.0
        and wilson(10, 10)[1] == pytest.approx(1.0)
        and 0.1 < wilson(5, 10)[0] < 0.5 < wilson(5, 10)[1]
    )
    assert interval_coverage([]) == ""


@given(
    runs=st.lists(st.tuples(st.floats(0.5, 4.0), st.floats(0.0, 0.5), st.floats(-0.5, 0.5)), min_size=1, max_size=12)
)
def test_speedup_coverage_counts_the_measured_speedups_inside_and_the_half_widths(runs):
    """Each run: a predicted speedup, its interval's relative half-width, and the measured speedup's error against
    it: inside exactly when |measured / predicted - 1| <= the half-width, the half-width reported as predicted."""
    from bench.report import speedup_coverage, wilson

    params = []
    for predicted, half, off in runs:
        measured = predicted * (1 + off)
        interval = [predicted * (1 - half), predicted * (1 + half)]
        params.append(
            {"measured_speedup": measured, "speedup_error": predicted / measured - 1, "speedup_interval": interval}
        )
    records = [Measure("c", "spmd predict", 0.1, "error", "share", params={**p, "runs": [p]}) for p in params]
    inside = sum(p["speedup_interval"][0] <= p["measured_speedup"] <= p["speedup_interval"][1] for p in params)
    low, high = wilson(inside, len(params))
    text = speedup_coverage(records)
    assert text.startswith(f"{inside} of {len(params)} ({100 * low:.0f} - {100 * high:.0f}%, Wilson 95% interval)")
    median = statistics.median(h for _, h, _ in runs)
    said = float(text.split("median half-width ")[1].split("%")[0])
    assert said == pytest.approx(100 * median, abs=0.051)  # printed to 0.1%
    assert speedup_coverage([Measure("c", "spmd predict", 0.1, "error", "share", params={"error": 0.1})]) == ""


def test_a_speedup_interval_open_above_holds_every_speedup_over_its_lower_end():
    """A predicted speedup whose time could reach zero has no upper end (``speedup_range``): counted inside above its
    lower end, its half-width unbounded, and the text says how many were open."""
    from bench.report import speedup_coverage

    def record(measured: float, interval: list) -> Measure:
        p = {"measured_speedup": measured, "speedup_error": 2.0 / measured - 1, "speedup_interval": interval}
        return Measure("c", "spmd predict", 0.1, "error", "share", params={**p, "runs": [p]})

    text = speedup_coverage([record(9.0, [1.5, None]), record(1.0, [1.5, None]), record(2.1, [1.8, 2.2])])
    assert text.startswith("2 of 3 ") and text.endswith("(2 of them open above: no upper end)")
    assert "median half-width inf%" in text


def test_launch_spread_is_each_cases_measured_time_across_its_runs():
    from bench.report import launch_spread

    def record(*times):
        runs = [{"measured_s": t} for t in times]
        return Measure("c", "spmd predict", 0.1, "error", "share", params={**runs[0], "runs": runs})

    assert launch_spread([record(1.0, 1.1, 1.05), record(2.0, 3.0), record(5.0)]) == (
        "median 30.0%, largest 50.0% over 2 cases"
    )
    assert launch_spread([record(1.0, 1.2), record(1.0, 1.1), record(1.0, 1.5)]) == (
        "median 20.0%, largest 50.0% over 3 cases"
    )
    assert launch_spread([record(1.0)]) == ""


# the launch spread was designed on these: the in-sample predict folders and the held-out rounds measured before the
# third round's freeze (in-sample for it); a later round's folders are not its input
LAUNCH_DESIGN = ("cpu-2core/predict", "h200x2/predict", "h200x4/predict", "h200x2/heldout", "h200x2/heldout2")


def test_a_predictions_launch_spread_is_the_90th_percentile_of_the_committed_launches():
    from bench.suites.predict import launch_deviations
    from spmd.scale.prediction.intervals import LAUNCH_SPREAD

    deviations = launch_deviations([RESULTS / folder for folder in LAUNCH_DESIGN])
    assert len(deviations) >= 198  # 41 predictions of 2 or more launches, every ordered pair
    assert statistics.quantiles(deviations, n=10)[-1] == pytest.approx(LAUNCH_SPREAD, abs=0.01)


def test_launch_deviations_hold_each_launch_to_every_other_launch_of_its_case(tmp_path):
    from bench.suites.predict import launch_deviations

    def record(case, *times):
        runs = [{"measured_s": t} for t in times]
        return Measure(case, "spmd predict", 0.1, "error", "share", params={**runs[0], "runs": runs})

    folder = tmp_path / "predict"
    measures = [record("a", 1.0, 1.2, 1.1), record("b", 2.0), record("c", 1.0, 2.0)]
    write_records(folder / "records.jsonl", collect("predict", [measures]))
    got = launch_deviations([folder])
    a = [abs(x / y - 1) for x, y in ((1.0, 1.2), (1.0, 1.1), (1.2, 1.0), (1.2, 1.1), (1.1, 1.0), (1.1, 1.2))]
    assert got == pytest.approx([*a, 0.5, 1.0])

"""The predict suite's records over several runs: each run's check kept, the median run's shown, and every run
derived again from its own inputs by ``bench recheck``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.records import Measure, collect, read_records, write_records
from bench.suites.predict import checked, recheck, runs_of
from tests.helpers import recorded_prediction

DATA = Path(__file__).resolve().parents[1] / "data"
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

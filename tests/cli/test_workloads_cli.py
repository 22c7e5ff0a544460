"""matmul and stencil through the command line: the configs in inputs/ generated and run at 3
ranks, a 2x2 SUMMA grid at 4, both under spmd scale, and every failure a user can hit."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from helpers import small, write_dataset
from mpi_job import DEADLINE_S, spmd
from scipy import ndimage


def test_matmul_configs_generate_run_and_save(tmp_path):
    config = small("matmul.yaml", tmp_path, **{"generate.shape": [301, 203], "params.b.generate.shape": [203, 97]})
    rc, out, err, _ = spmd("generate", config, cwd=tmp_path)
    assert rc == 0 and "wrote 2 of 2" in out, err
    rc, out, err, _ = spmd("run", config, cwd=tmp_path)
    assert rc == 0, err
    report = json.loads((tmp_path / "results/matmul/report.json").read_text())
    a = h5py.File(tmp_path / "data/matmul/A.h5")["A"][...].astype(np.float64)
    b = h5py.File(tmp_path / "data/matmul/B.h5")["B"][...].astype(np.float64)
    c = h5py.File(tmp_path / "results/matmul/C.h5")["C"][...]
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5 * np.abs(a @ b).max())
    assert report["result"]["saved"] == "results/matmul/C.h5:C" and report["verified"]
    assert "tflops_per_rank" in out and "tflops_job" in report["metrics"]
    assert [o["op"] for o in report["problem"]["comm"]] == ["bcast", "gather"]


def test_summa_on_a_2x2_grid_at_4_ranks(tmp_path):
    config = small(
        "matmul-summa.yaml",
        tmp_path,
        **{"generate.shape": [45, 31], "params.b.generate.shape": [31, 27], "params.panel": 4},
    )
    rc, out, err, _ = spmd("generate", config, cwd=tmp_path, ranks=1)
    assert rc == 0, err
    rc, out, err, _ = spmd("run", config, cwd=tmp_path, ranks=4, timeout=120)
    assert rc == 0, err
    report = json.loads((tmp_path / "results/matmul-summa/report.json").read_text())
    assert report["result"]["grid"] == [2, 2]
    a = h5py.File(tmp_path / "data/matmul-summa/A.h5")["A"][...]
    b = h5py.File(tmp_path / "data/matmul-summa/B.h5")["B"][...]
    np.testing.assert_allclose(h5py.File(tmp_path / "results/matmul-summa/C.h5")["C"][...], a @ b, rtol=1e-12)


@pytest.mark.parametrize("config", ["stencil.yaml", "stencil-blocks.yaml"])
def test_stencil_configs_generate_run_and_match_scipy(tmp_path, config):
    path = small(
        config,
        tmp_path,
        **{"generate.shape": [61, 47], "params.iterations": 3, "params.save": {"path": "out.h5", "dataset": "f"}},
    )
    rc, out, err, _ = spmd("generate", path, cwd=tmp_path)
    assert rc == 0, err
    rc, out, err, _ = spmd("run", path, cwd=tmp_path)
    assert rc == 0, err
    cfg = yaml.safe_load(path.read_text())
    p = cfg["params"]
    from spmd.workloads.stencil.filters import stencil_weights

    weights = stencil_weights(p["kernel"], p.get("size", 3), p.get("sigma", 1.0))
    want = h5py.File(tmp_path / cfg["input"]["path"])[cfg["input"]["dataset"]][...].astype(np.float64)
    for _ in range(3):
        want = ndimage.correlate(want, weights, mode=p["boundary"])
    got = h5py.File(tmp_path / "out.h5")["f"][...]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    report = json.loads((tmp_path / cfg["output"] / "report.json").read_text())
    assert report["result"]["grid"] == [3, 1]  # rows, and the default grid of 3 ranks for blocks
    assert len(report["metrics"]["effective_GBps_per_rank"]) == 3


@pytest.mark.parametrize("workload,mode", [("matmul.yaml", "strong"), ("stencil.yaml", "weak")])
def test_both_workloads_run_under_spmd_scale(tmp_path, workload, mode):
    shape = (
        {"generate.shape": [96, 64], "params.b.generate.shape": [64, 32]}
        if workload == "matmul.yaml"
        else {"generate.shape": [64, 48], "params.iterations": 2}
    )
    config = small(workload, tmp_path, **shape, **{"params.save": None})
    rc, out, err, _ = spmd(
        "scale",
        config,
        "--mode",
        mode,
        "--ranks",
        "1,3",
        "--out",
        tmp_path / "sc",
        "--probe-max-bytes",
        "64K",
        cwd=tmp_path,
        timeout=180,
    )
    assert rc == 0, err
    scaling = json.loads((tmp_path / "sc/scaling.json").read_text())
    rows = scaling["series"][mode]
    assert [r["ranks"] for r in rows] == [1, 3] and all(r["verified"] for r in rows)
    if mode == "weak":
        assert rows[1]["problem_bytes"] == 3 * rows[0]["problem_bytes"]
    assert (tmp_path / "sc/scaling.html").exists()


def write_config(folder: Path, workload: str, params: dict, **keys) -> Path:
    cfg = {"workload": workload, "device": "cpu", "repeats": 1, "output": str(folder / "out"), "params": params, **keys}
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(1)
    write_dataset(tmp_path / "A.h5", rng.standard_normal((30, 20)).astype(np.float32), name="A")
    write_dataset(tmp_path / "B.h5", rng.standard_normal((20, 10)).astype(np.float32), name="B")
    write_dataset(tmp_path / "B64.h5", rng.standard_normal((20, 10)), name="B")
    write_dataset(tmp_path / "Bwrong.h5", rng.standard_normal((21, 10)).astype(np.float32), name="B")
    write_dataset(tmp_path / "thin.h5", rng.standard_normal((5, 40)).astype(np.float32), name="f")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "C.h5").mkdir()  # a folder where the result file should go
    return tmp_path


def mm(**params):
    return "matmul", {"b": {"dataset": "B"}, **params}


def st(**params):
    return "stencil", params


FAILURES = {
    # name: (workload, params, message); file paths are filled in by the test
    "B rows differ from A columns": (*mm(), "B has 21 rows, but A"),
    "B dtype differs": (*mm(), "B is float64, A is float32"),
    "B missing": (*mm(), "nope.h5: no such file"),
    "summa grid does not fit": (*mm(algorithm="summa", grid=[2, 2]), "2 x 2 = 4 ranks, but the job has 3"),
    "bcast with summa": (*mm(algorithm="summa", b_source="bcast"), "b_source applies to algorithm: rows"),
    "tf32 on float64": (*mm(), "TF32 applies to float32"),
    "unknown matmul key": (*mm(gather_to="root"), "unknown key params.gather_to"),
    "result cannot be saved": (*mm(), "C.h5"),
    "too few rows for the radius": (*st(kernel="box", size=5), "each block needs at least 2 row(s)"),
    "even kernel": (*st(kernel="box", size=4), "params.size: an odd width"),
    "unknown boundary": (*st(boundary="mirror"), "params.boundary: 'mirror' is not one of"),
    "fused on the CPU": (*st(method="fused"), "fused is a CUDA kernel"),
}
ADJUST = {  # what each failure changes in the files or params
    "B rows differ from A columns": lambda p, d: p["b"].update(path=str(d / "Bwrong.h5")),
    "B dtype differs": lambda p, d: p["b"].update(path=str(d / "B64.h5")),
    "B missing": lambda p, d: p["b"].update(path=str(d / "nope.h5")),
    "tf32 on float64": lambda p, d: (p["b"].update(path=str(d / "B64.h5")), p.update(tf32=True)),
    "result cannot be saved": lambda p, d: p.update(save={"path": str(d / "taken" / "C.h5"), "dataset": "C"}),
}


@pytest.mark.parametrize("case", FAILURES)
def test_failures_exit_2_name_the_cause_and_leave_no_report(files, case):
    workload, params, message = FAILURES[case]
    params = json.loads(json.dumps(params))
    if workload == "matmul":
        params["b"]["path"] = str(files / "B.h5")
        inp = {"path": str(files / "A.h5"), "dataset": "A"}
    else:
        inp = {"path": str(files / "thin.h5"), "dataset": "f"}
    if case in ADJUST:
        ADJUST[case](params, files)
    if case == "tf32 on float64":
        write_dataset(files / "A64.h5", np.ones((30, 20)), name="A")
        inp["path"] = str(files / "A64.h5")
    config = write_config(files, workload, params, input=inp)
    rc, out, err, elapsed = spmd("run", config)
    assert rc == 2, (out, err)
    assert message in err and socket.gethostname() in err, err
    assert elapsed < DEADLINE_S
    assert not (files / "out").exists()
    assert not list(files.glob("taken/*.tmp"))

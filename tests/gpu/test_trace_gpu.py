"""Traces and NVTX on a GPU: device phases placed on the GPU's compute stream from their CUDA events, with the
report's durations; a torch model's marked steps on the timeline (PyTorch's CUDA events against spmd's); NVTX
ranges seen by Nsight Systems where nsys is installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import LAUNCH_ENV, write_dataset
from mpi_job import mpiexec, spmd

ROOT = Path(__file__).resolve().parents[2]


def gpu_reduce(folder: Path) -> Path:
    write_dataset(folder / "x.h5", np.random.default_rng(2).standard_normal(4_000_003).astype(np.float32))
    path = folder / "job.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workload": "reduce",
                "device": "gpu",
                "warmup": 1,
                "repeats": 3,
                "input": {"path": str(folder / "x.h5"), "dataset": "x"},
                "output": str(folder / "out"),
            }
        )
    )
    return path


def test_device_phases_are_on_the_compute_stream_with_the_reports_durations(tmp_path):
    rc, out, err, _ = spmd("run", gpu_reduce(tmp_path), "--trace", tmp_path / "t.json", "--nvtx", ranks=1)
    assert rc == 0, err
    report = json.loads((tmp_path / "out/report.json").read_text())
    trace = json.loads((tmp_path / "t.json").read_text())
    assert report["nvtx"].startswith("on")
    threads = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    compute = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "compute"]
    assert compute and all(threads[e["tid"]].endswith("compute stream") for e in compute)
    warm = report["warmup"]
    for i, record in enumerate(report["per_rank"][0]["repeats"]):
        mine = [e for e in compute if e["args"]["repeat"] == warm + i]
        assert sum(e["dur"] for e in mine) / 1e6 == pytest.approx(record["compute"], abs=2e-6)
        outline = next(
            e
            for e in trace["traceEvents"]
            if e["ph"] == "X" and e["cat"] == "repeat" and e["args"]["repeat"] == warm + i
        )
        assert all(outline["ts"] - 50 <= e["ts"] <= outline["ts"] + outline["dur"] for e in mine)


def test_a_torch_models_marked_steps_are_on_the_timeline(tmp_path):
    pytest.importorskip("torch", reason="workload torch needs PyTorch")
    rc, _, err, _ = spmd("generate", ROOT / "examples/torch/mlp-medium.yaml", cwd=tmp_path, ranks=1, timeout=300)
    assert rc == 0, err
    (tmp_path / "examples/torch").mkdir(parents=True)
    (tmp_path / "examples/torch/mlp.py").write_text((ROOT / "examples/torch/mlp.py").read_text())
    args = [x for o in ("device=gpu", "params.save=null", "repeats=2", "params.steps=16") for x in ("-o", o)]
    rc, _, err, _ = spmd(
        "run",
        ROOT / "examples/torch/mlp-medium.yaml",
        *args,
        "--trace",
        tmp_path / "t.json",
        cwd=tmp_path,
        ranks=1,
        timeout=300,
    )
    assert rc == 0, err
    trace = json.loads((tmp_path / "t.json").read_text())
    steps = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] in ("forward", "backward", "allreduce")]
    assert {e["cat"] for e in steps} == {"forward", "backward", "allreduce"}
    for e in steps:
        outline = next(
            o
            for o in trace["traceEvents"]
            if o["ph"] == "X" and o["cat"] == "repeat" and o["args"]["repeat"] == e["args"]["repeat"]
        )
        assert outline["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outline["ts"] + outline["dur"] + 1.0


def test_nsys_sees_spmds_nvtx_ranges(tmp_path):
    nsys = shutil.which("nsys")
    if nsys is None:
        pytest.skip(
            "nsys (Nsight Systems) is not installed on this GPU machine: the ranges are checked without it "
            "in tests/unit/test_timing.py"
        )
    cmd = [
        nsys,
        "profile",
        "-t",
        "cuda,nvtx",
        "-o",
        str(tmp_path / "prof"),
        "--force-overwrite",
        "true",
        *mpiexec(),
        "-n",
        "1",
        sys.executable,
        "-m",
        "spmd",
        "run",
        str(gpu_reduce(tmp_path)),
        "-q",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=LAUNCH_ENV, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    stats = subprocess.run(
        [nsys, "stats", "-r", "nvtx_sum", str(tmp_path / "prof.nsys-rep")], capture_output=True, text=True, timeout=300
    )
    for phase in ("read", "compute", "comm", "repeat 1"):
        assert phase in stats.stdout, stats.stdout[-3000:]

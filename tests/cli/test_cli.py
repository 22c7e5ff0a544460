"""The command line under a real ``mpiexec -n 3``: success and every failure a user can hit.

Each failure must end the whole job with a non-zero exit well within 30 s, name the rank,
host and cause, and leave no report behind.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from helpers import assert_result_close, reference, write_dataset
from mpi_job import DEADLINE_S, RANKS, spmd

from spmd.core import xp as xpmod


def write_config(folder: Path, **keys) -> Path:
    cfg = {"workload": "reduce", "device": "cpu", "repeats": 2, "output": str(folder / "out"), **keys}
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def data(tmp_path):
    x = np.random.default_rng(0).standard_normal(10_001).astype(np.float32)
    write_dataset(tmp_path / "x.h5", x)
    return x, tmp_path / "x.h5"


def test_run_writes_verified_report(tmp_path, data):
    x, path = data
    config = write_config(tmp_path, input={"path": str(path), "dataset": "x"})
    rc, out, err, _ = spmd("run", config, "-o", "params.ddof=1", "--out", tmp_path / "elsewhere")
    assert rc == 0, err
    report = json.loads((tmp_path / "elsewhere" / "report.json").read_text())
    assert not (tmp_path / "out").exists()  # --out wins over the config's output
    assert report["schema"] == 3 and report["ranks"] == RANKS and report["verified"] is True
    assert report["config"]["params"]["ddof"] == 1 and report["comm"] == "mpi" and report["device"] == "cpu"
    assert len(report["nodes"]) == 1 and report["nodes"][0]["ranks"] == [0, 1, 2]
    assert_result_close(report["result"], reference(x, ddof=1))
    assert set(report["timings"]) >= {"read", "wait", "h2d", "compute", "comm", "total"}
    assert "verified" in out and "report.json" in out


def test_generate_then_run_verifies_against_stored_answers(tmp_path):
    config = write_config(
        tmp_path,
        input={"shards": str(tmp_path / "d" / "s-*.h5"), "dataset": "x"},
        generate={"shape": [5003, 2], "dtype": "float64", "shards": 4},
    )
    rc, out, err, _ = spmd("generate", config, ranks=2)
    assert rc == 0, err
    assert "wrote 4 of 4" in out and len(list((tmp_path / "d").glob("s-*.h5"))) == 4
    rc, out, err, _ = spmd("run", config)
    assert rc == 0, err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verification"]["reference"] == "attrs"
    parts = [h5py.File(p)["x"][...] for p in sorted((tmp_path / "d").glob("s-*.h5"))]
    assert_result_close(report["result"], reference(np.concatenate(parts)))


def corrupt_chunk_file(path: Path) -> None:
    """A compressed dataset whose metadata reads fine but whose last chunk is garbage."""
    x = np.arange(4000, dtype=np.float64)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", data=x, chunks=(1000,), compression="gzip")
        offset = d.id.get_chunk_info(3).byte_offset
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(b"\xff" * 64)


FAILURES = {
    # name: (how to set the case up -> config keys, expected message part)
    "missing file": (lambda d: {"input": {"path": str(d / "nope.h5")}}, "nope.h5: no such file"),
    "missing dataset": (lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "y"}}, "no dataset 'y'"),
    "wrong dtype": (lambda d: {"input": {"path": str(d / "int.h5"), "dataset": "x"}}, "dtype int32 is not supported"),
    "wrong rank of array": (lambda d: {"input": {"path": str(d / "cube.h5"), "dataset": "x"}}, "3-D array"),
    "too few rows": (
        lambda d: {"input": {"path": str(d / "two.h5"), "dataset": "x"}},
        "2 rows cannot be split over 3 ranks",
    ),
    "not hdf5": (lambda d: {"input": {"path": str(d / "text.h5"), "dataset": "x"}}, "not an HDF5 file"),
    "truncated hdf5": (lambda d: {"input": {"path": str(d / "cut.h5"), "dataset": "x"}}, "cut.h5: truncated HDF5 file"),
    "wrong type": (
        lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "x"}, "repeats": "three"},
        "repeats: expected an integer or auto, got 'three'",
    ),
    "zero repeats": (
        lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "x"}, "repeats": 0},
        "repeats: must be >= 1 or auto, got 0",
    ),
    "negative timeout": (
        lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "x"}, "timeout_s": -5},
        "timeout_s: must be a positive number of seconds, got -5",
    ),
    "zero-size shape": (
        lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "x"}, "generate": {"shape": [0]}},
        "generate.shape: sizes must be positive, got [0]",
    ),
    "negative ddof": (
        lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "x"}, "params": {"ddof": -1}},
        "params.ddof: must be >= 0, got -1",
    ),
    "unknown key": (
        lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "x"}, "repeatz": 2},
        "unknown key repeatz",
    ),
    "bad value": (lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "x"}, "comm": "gloo"}, "comm: 'gloo'"),
    "mpi-cuda without proof": (
        lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "x"}, "comm": "mpi-cuda"},
        "mpi-cuda needs a CUDA-aware MPI",
    ),
    "verify attrs without answers": (
        lambda d: {"input": {"path": str(d / "x.h5"), "dataset": "x"}, "verify": "attrs"},
        "has no expected-answer attributes",
    ),
    "fewer shards than ranks": (
        lambda d: {"input": {"shards": copies(d / "x.h5", 2), "dataset": "x"}},
        "2 shard files for 3 ranks",
    ),
}


def copies(path, n: int) -> list[str]:
    """``path`` and n - 1 copies of it beside it: n distinct shard files (one file listed twice is refused)."""
    for i in range(1, n):
        shutil.copy(path, path.with_name(f"copy{i}-{path.name}"))
    return [str(path)] + [str(path.with_name(f"copy{i}-{path.name}")) for i in range(1, n)]


@pytest.mark.parametrize("case", FAILURES)
def test_input_and_config_failures_exit_2_on_every_rank(tmp_path, data, case):
    make_keys, message = FAILURES[case]
    write_dataset(tmp_path / "int.h5", np.arange(10, dtype=np.int32))
    write_dataset(tmp_path / "cube.h5", np.zeros((4, 2, 2), dtype=np.float32))
    write_dataset(tmp_path / "two.h5", np.zeros(2, dtype=np.float32))
    (tmp_path / "text.h5").write_text("this is not HDF5\n" * 10)
    write_dataset(tmp_path / "cut.h5", np.arange(100_000, dtype=np.float32))
    os.truncate(tmp_path / "cut.h5", os.path.getsize(tmp_path / "cut.h5") // 2)  # a copy cut short
    config = write_config(tmp_path, **make_keys(tmp_path))
    rc, out, err, elapsed = spmd("run", config)
    assert rc == 2, (out, err)
    assert message in err and f"rank 0 on {socket.gethostname()}" in err, err
    assert elapsed < DEADLINE_S
    assert not (tmp_path / "out").exists()


def test_config_that_is_not_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: [reduce\n")
    rc, _, err, _ = spmd("run", bad)
    assert rc == 2 and "not valid YAML" in err


def test_one_shard_missing_for_one_rank_only(tmp_path, data):
    _, path = data
    shards = [*copies(path, 3), str(tmp_path / "gone.h5")]  # rank 2 owns the last
    config = write_config(tmp_path, input={"shards": shards, "dataset": "x"})
    rc, _, err, elapsed = spmd("run", config)
    assert rc == 2 and elapsed < DEADLINE_S
    assert f"rank 2 on {socket.gethostname()}" in err and "gone.h5: no such file" in err, err
    assert not (tmp_path / "out").exists()


def test_one_rank_failing_mid_run_aborts_the_job(tmp_path, data):
    """A corrupt chunk only rank 2 reads: it fails during the read phase, alone, and aborts everyone."""
    _, path = data
    corrupt_chunk_file(tmp_path / "bad.h5")
    write_dataset(tmp_path / "good.h5", np.arange(4000, dtype=np.float64))
    shards = [*copies(tmp_path / "good.h5", 2), str(tmp_path / "bad.h5")]
    config = write_config(tmp_path, input={"shards": shards, "dataset": "x"})
    rc, _, err, elapsed = spmd("run", config)
    assert rc != 0 and elapsed < DEADLINE_S
    assert f"rank 2 on {socket.gethostname()}" in err and "bad.h5:x rows 0-4000: read failed" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(xpmod.gpu_count() > 0, reason="this machine has a GPU: device gpu is not an error here")
def test_device_gpu_without_a_gpu(tmp_path, data):
    _, path = data
    config = write_config(tmp_path, input={"path": str(path), "dataset": "x"}, device="gpu")
    rc, _, err, _ = spmd("run", config)
    assert rc == 2 and "device: gpu requested but" in err, err


def test_wrong_answer_fails_verification_with_exit_3(tmp_path):
    config = write_config(tmp_path, input={"path": str(tmp_path / "g.h5"), "dataset": "x"}, generate={"shape": [3001]})
    assert spmd("generate", config, ranks=1)[0] == 0
    with h5py.File(tmp_path / "g.h5", "r+") as f:  # plant a wrong expected sum
        f["x"].attrs["sum"] = f["x"].attrs["sum"] + 1.0
    rc, _, err, _ = spmd("run", config)
    assert rc == 3 and "sum = " in err and "expected" in err, err
    assert not (tmp_path / "out").exists()

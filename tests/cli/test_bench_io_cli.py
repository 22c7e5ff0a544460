"""``spmd bench io`` under ``mpiexec -n 3``: every rank's table of engines against the pread limits, the JSON
behind it, cold reads, a filtered dataset said to be h5py's, and a bad option refused."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import yaml
from mpi_job import spmd

WAYS = {"h5py", "direct", "pread, 1 thread"}


def config(folder, **keywords):
    with h5py.File(folder / "x.h5", "w") as f:
        f.create_dataset("x", data=np.random.default_rng(2).standard_normal((90_001, 4)).astype(np.float32), **keywords)
    path = folder / "job.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workload": "reduce",
                "device": "cpu",
                "input": {"path": str(folder / "x.h5"), "dataset": "x"},
                "io": {"threads": 2, "buffer_mb": 0.1},
            }
        )
    )
    return path


@pytest.mark.parametrize("cold", [False, True])
def test_every_rank_measures_every_engine_against_the_pread_limits(tmp_path, cold):
    rc, out, err, _ = spmd(
        "bench",
        "io",
        config(tmp_path),
        "--rounds",
        "2",
        "--json",
        tmp_path / "io.json",
        *(["--cold"] if cold else []),
        cwd=tmp_path,
        ranks=3,
    )
    assert rc == 0, err
    result = json.loads((tmp_path / "io.json").read_text())
    assert [r["rank"] for r in result["per_rank"]] == [0, 1, 2] and result["rounds"] == 2
    for r in result["per_rank"]:
        assert r["bytes"] == 30_000 * 16 + (16 if r["rank"] == 0 else 0)
        assert WAYS <= set(r["seconds"]) and any(w.startswith("pread, ") and "thread" in w for w in r["seconds"])
        preads = [w for w in r["seconds"] if w.startswith("pread, ")]  # whole-file, and the pieces on N threads
        assert len(preads) == 2 and not any(w.endswith("1 threads") for w in preads), preads
        assert all(len(times) == 2 and min(times) > 0 for times in r["seconds"].values())
        assert r["cold"] is cold and [e["engine"] for e in r["engines"]] == ["direct"]
    for rank in range(3):
        assert f"# rank {rank} on " in out
    assert out.count("   direct ") == 3
    # a file system that keeps the pages (tmpfs) is said to, not passed off as cold
    assert ("cold (pages dropped before each read" in out or "cold asked, but up to" in out) is cold


def test_a_filtered_dataset_is_measured_by_h5py_and_says_why(tmp_path):
    rc, out, err, _ = spmd(
        "bench", "io", config(tmp_path, chunks=(1000, 4), compression="gzip"), "--rounds", "1", cwd=tmp_path, ranks=2
    )
    assert rc == 0, err
    assert "direct is h5py for" in out and "filtered (compressed or shuffled)" in out
    assert "pread, 1 thread" not in out  # no plain bytes to pread


def test_zero_rounds_are_refused(tmp_path):
    rc, _, err, _ = spmd("bench", "io", config(tmp_path), "--rounds", "0", cwd=tmp_path, ranks=2)
    assert rc == 2 and "--rounds: at least 1, got 0" in err, err

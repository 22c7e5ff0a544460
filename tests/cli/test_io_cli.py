"""Config ``io`` through ``spmd run`` under ``mpiexec -n 3``: each engine gives the same verified answer and
report.json says which engine read each rank's rows; rows one rank's file lacks end the job, naming that rank,
the file, dataset and rows, with no report."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import h5py
import numpy as np
import pytest
import yaml
from mpi_job import LAUNCH_ENV, mpiexec, spmd

HOST = socket.gethostname()


def reduce_config(folder, **keywords):
    data = np.random.default_rng(4).standard_normal(30_001).astype(np.float64)
    with h5py.File(folder / "x.h5", "w") as f:
        ds = f.create_dataset("x", shape=data.shape, dtype=data.dtype, **keywords)
        ds[:] = data
    cfg = {
        "workload": "reduce",
        "device": "cpu",
        "repeats": 2,
        "verify": "full",
        "input": {"path": str(folder / "x.h5"), "dataset": "x"},
        "output": str(folder / "out"),
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, data


@pytest.mark.parametrize(
    "engine,keywords,want",
    [
        ("auto", {}, "direct"),
        ("direct", {"chunks": (4_001,)}, "direct"),
        ("h5py", {}, "h5py"),
        ("auto", {"chunks": (1_000,), "compression": "gzip"}, "h5py"),
    ],
)
def test_each_engine_gives_the_verified_answer_and_is_reported(tmp_path, engine, keywords, want):
    config, data = reduce_config(tmp_path, **keywords)
    rc, _, err, _ = spmd(
        "run",
        config,
        "-o",
        f"io.engine={engine}",
        "-o",
        "io.buffer_mb=0.05",
        "-o",
        "io.threads=3",
        cwd=tmp_path,
        ranks=3,
    )
    assert rc == 0, err
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["verified"] and report["result"]["sum"] == pytest.approx(data.sum(), rel=1e-12)
    io = report["io"]
    assert (io["engine"], io["threads"], io["buffer_mb"]) == (engine, 3, 0.05)
    assert [[piece["engine"] for piece in rank] for rank in io["per_rank"]] == [[want]] * 3
    assert [rank[0]["source"] for rank in io["per_rank"]] == [
        f"{tmp_path / 'x.h5'}:x rows {a}-{b}" for a, b in ((0, 10001), (10001, 20001), (20001, 30001))
    ]
    if want == "h5py" and engine == "auto":
        assert "filtered" in io["per_rank"][0][0]["why_h5py"]


def test_rows_missing_from_one_ranks_part_of_the_file_end_the_job_naming_it(tmp_path):
    config, _ = reduce_config(tmp_path, chunks=(1_000,))
    with h5py.File(tmp_path / "x.h5", "a") as f:  # the same dataset with its last chunks never written
        del f["x"]
        ds = f.create_dataset("x", shape=(30_001,), dtype=np.float64, chunks=(1_000,))
        ds[:25_000] = 1.0
    rc, _, err, _ = spmd("run", config, cwd=tmp_path, ranks=3)
    assert rc == 2, err
    assert (
        f"rank 2 on {HOST}: {tmp_path / 'x.h5'}:x rows 25000-26000: the chunk holding them was never written" in err
    ), err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "value,message",
    [
        ("io.engine=kvik", "io.engine: 'kvik' is not one of auto, h5py, direct, kvikio, mapped"),
        ("io.engine=kvikio", "io.engine: kvikio reads into GPU memory; this run is on the CPU"),
        ("io.engine=mapped", "io.engine: mapped reads into GPU memory; this run is on the CPU"),
        ("io.threads=0", "io.threads: auto, or from 1 to 256 reader threads, got 0"),
        ("io.threads=many", "io.threads: expected an integer or auto, got 'many'"),
        ("io.buffer_size=8", "unknown key io.buffer_size"),
    ],
)
def test_a_bad_io_key_is_refused_by_name(tmp_path, value, message):
    config, _ = reduce_config(tmp_path)
    rc, _, err, _ = spmd("run", config, "-o", value, cwd=tmp_path, ranks=2)
    assert rc == 2 and message in err, err


@pytest.mark.parametrize(
    "algorithm,grid,want_a", [("rows", None, "direct"), ("summa", [3, 1], "direct"), ("summa", [1, 3], "h5py")]
)  # 1 x 3: A's blocks split rows
def test_matmul_reads_whole_rows_with_the_direct_engine_and_says_so(tmp_path, algorithm, grid, want_a):
    from helpers import small

    config = small(
        "matmul.yaml",
        tmp_path,
        **{
            "generate.shape": [301, 203],
            "params.b.generate.shape": [203, 97],
            "params.algorithm": algorithm,
            "params.gather": "none",
            "params.b_source": "read",
            "params.save": None,
            **({"params.grid": grid} if grid else {}),
        },
    )
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    sums = {}
    for engine in ("h5py", "auto"):
        rc, _, err, _ = spmd(
            "run", config, "-o", f"io.engine={engine}", "--out", f"out-{engine}", cwd=tmp_path, ranks=3
        )
        assert rc == 0, err
        report = json.loads((tmp_path / f"out-{engine}/report.json").read_text())
        sums[engine] = report["result"]["sum"]
        engines = [
            {e["source"].split(" ")[0].split(":")[-1]: e["engine"] for e in rank} for rank in report["io"]["per_rank"]
        ]
        a_name = [k for k in engines[0] if k != "B"][0]
        assert all(e[a_name] == ("h5py" if engine == "h5py" else want_a) for e in engines), engines
    assert sums["h5py"] == sums["auto"]  # the same bytes, the same products


def test_train_reads_its_rows_with_the_direct_engine_and_says_so(tmp_path):
    from helpers import train_config

    config = train_config(tmp_path, **{"repeats": 1})
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    rc, _, err, _ = spmd("run", config, "--out", "out", cwd=tmp_path, ranks=2)
    assert rc == 0, err
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert [[piece["engine"] for piece in rank] for rank in report["io"]["per_rank"]] == [["direct"], ["direct"]]
    assert report["io"]["per_rank"][1][0]["source"].endswith("rows 1024-2048, columns 0-24")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to bind a rank to fewer than it may use")
def test_a_rank_bound_to_one_cpu_reads_on_its_share_of_the_node(tmp_path):
    """The launcher bound the rank to one CPU, as Open MPI's mpirun does. io.threads: auto reads on every CPU of
    its share of the node (here, one rank, all of them), report.json says how many, and the answer is verified."""
    config, data = reduce_config(tmp_path)
    node = len(os.sched_getaffinity(0))
    cmd = [*mpiexec(), "-n", "1", sys.executable, "-m", "spmd", "run", str(config), "-o", "io.buffer_mb=0.01"]
    done = subprocess.run(
        cmd,
        cwd=tmp_path,
        env={k: v for k, v in LAUNCH_ENV.items() if k not in ("SLURM_CPUS_PER_TASK", "SLURM_STEP_ID")},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out/report.json").read_text())
    assert report["verified"] and report["result"]["sum"] == pytest.approx(data.sum(), rel=1e-12)
    piece = report["io"]["per_rank"][0][0]
    assert (report["io"]["threads"], piece["engine"], piece["threads"], piece["reader_cpus"]) == (
        "auto",
        "direct",
        node,
        node,
    )

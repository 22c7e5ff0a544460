"""train through the command line at 2 and 3 ranks: a stated accuracy reached, checkpoint and
resume ending on the very weights of an uninterrupted run, SIGUSR1 on one rank stopping the
job with a checkpoint and exit 0, spmd scale, and the failures a user can hit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from helpers import LAUNCH_ENV, train_config, weights
from mpi_job import mpiexec, spmd


def test_training_reaches_the_stated_accuracy(tmp_path):
    """Stated in docs/configs.md: >= 85% held-out accuracy within 1,000 Adam steps."""
    config = train_config(
        tmp_path,
        **{
            "generate.shape": [16384, 32],
            "params.model": [32, 128, 64, 10],
            "params.batch": 64,
            "params.lr": 0.003,
            "params.steps": 100,
            "params.eval_rows": 2048,
            "params.target_accuracy": 0.85,
            "repeats": 9,
        },
    )
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    rc, out, err, _ = spmd("run", config, cwd=tmp_path, ranks=2, timeout=120)
    assert rc == 0, err
    result = json.loads((tmp_path / "results/train/report.json").read_text())["result"]
    assert result["steps"] == 1000 and result["global_batch"] == 128
    assert result["eval_accuracy"] >= 0.85 and result["loss_per_window"][-1] < result["loss_per_window"][0] / 2


def test_resume_ends_on_the_weights_of_an_uninterrupted_run(tmp_path):
    full = train_config(tmp_path, "full.yaml", **{"params.checkpoint": {"path": "full.h5"}, "params.dropout": 0.2})
    assert spmd("generate", full, cwd=tmp_path, ranks=1)[0] == 0
    assert spmd("run", full, cwd=tmp_path, ranks=3)[0] == 0
    # the same training, stopped after 2 of its 4 windows, then resumed with the full config
    half = train_config(
        tmp_path, "half.yaml", **{"params.checkpoint": {"path": "half.h5"}, "params.dropout": 0.2, "repeats": 1}
    )
    assert spmd("run", half, cwd=tmp_path, ranks=3)[0] == 0
    rc, out, err, _ = spmd(
        "run",
        full,
        "-o",
        "params.resume=half.h5",
        "-o",
        "params.checkpoint.path=resumed.h5",
        "--out",
        "resumed",
        cwd=tmp_path,
        ranks=3,
    )
    assert rc == 0, err
    report = json.loads((tmp_path / "resumed/report.json").read_text())
    assert report["result"]["resumed_from_step"] == 20 and report["result"]["steps"] == 40
    np.testing.assert_array_equal(weights(tmp_path / "resumed.h5"), weights(tmp_path / "full.h5"))
    assert not np.array_equal(weights(tmp_path / "half.h5"), weights(tmp_path / "full.h5"))


def launched_rank(pid: int) -> int:
    """The MPI rank of process ``pid``, from the rank its launcher put in its environment (MPICH's PMI_RANK, Open
    MPI's OMPI_COMM_WORLD_RANK)."""
    environ = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in item)
    return int(environ.get("PMI_RANK", environ.get("OMPI_COMM_WORLD_RANK")))


def test_sigusr1_on_one_rank_checkpoints_and_exits_0_then_resume_finishes(tmp_path):
    full = train_config(tmp_path, "full.yaml", **{"params.checkpoint": {"path": "full.h5"}, "repeats": 199})
    assert spmd("generate", full, cwd=tmp_path, ranks=1)[0] == 0
    assert spmd("run", full, cwd=tmp_path, ranks=2, timeout=240)[0] == 0
    long = train_config(
        tmp_path, "long.yaml", **{"params.checkpoint": {"path": "ckpt.h5", "every": 50}, "repeats": 199}
    )
    cmd = [*mpiexec(), "-n", "2", sys.executable, "-m", "spmd", "run", str(long), "--out", "stopped"]
    proc = subprocess.Popen(
        cmd,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=LAUNCH_ENV,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ckpt.h5").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        ranks = [
            int(p)
            for p in subprocess.run(["pgrep", "-f", f"spmd run {long}"], capture_output=True, text=True).stdout.split()
            if int(p) != proc.pid
        ]
        assert len(ranks) == 2, ranks
        signalled = launched_rank(ranks[1])  # the process ids need not come in rank order
        os.kill(ranks[1], signal.SIGUSR1)  # one rank only, as a node-local signal might
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert f"spmd: stopped: rank {signalled} on" in err and "SIGUSR1 received: checkpoint at step" in err
    assert not (tmp_path / "stopped/report.json").exists()
    with h5py.File(tmp_path / "ckpt.h5") as f:
        step = int(f.attrs["step"])
    assert 50 <= step < 2000 and step % 10 == 0
    rc, out, err, _ = spmd(
        "run",
        long,
        "-o",
        "params.resume=ckpt.h5",
        "-o",
        "params.checkpoint.path=end.h5",
        cwd=tmp_path,
        ranks=2,
        timeout=240,
    )
    assert rc == 0, err
    np.testing.assert_array_equal(weights(tmp_path / "end.h5"), weights(tmp_path / "full.h5"))


def test_train_under_spmd_scale_strong_and_weak(tmp_path):
    config = train_config(tmp_path, **{"params.batch": 32})
    rc, out, err, _ = spmd(
        "scale",
        config,
        "--mode",
        "both",
        "--ranks",
        "1,2",
        "--probe-max-bytes",
        "64K",
        cwd=tmp_path,
        ranks=2,
        timeout=120,
    )
    assert rc == 0, err
    scaling = json.loads((tmp_path / "results/train/scaling/scaling.json").read_text())
    batches = {(r["mode"], r["ranks"]): r["report"]["result"]["global_batch"] for r in scaling["runs"]}
    assert batches == {("strong", 1): 32, ("strong", 2): 32, ("weak", 1): 32, ("weak", 2): 64}
    assert (tmp_path / "results/train/scaling/scaling.html").exists()


def corrupt_labels(path, row, value):
    with h5py.File(path, "r+") as f:
        f["labels"][row] = value


@pytest.mark.parametrize(
    "case",
    [
        "label",
        "features",
        "labels-missing",
        "eval-missing",
        "shards",
        "resume-model",
        "resume-end",
        "graph-cpu",
        "bf16-cpu",
        "unknown-key",
        "batch-shards",
        "strong-batch",
    ],
)
def test_failures_exit_2_naming_rank_and_cause_with_no_report(tmp_path, case):
    config = train_config(tmp_path)
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    data = tmp_path / "data/train/medium.h5"
    args, want, ranks = [], None, 3
    if case == "label":  # a bad label in the last rank's rows only
        corrupt_labels(data, 2000, 7)
        want = "rank 2 on .*: .*medium.h5:labels row 2000: label 7 is outside 0..4"
    elif case == "features":
        args, want = ["-o", "params.model=[25,8,5]"], "24 features per row, the model 25-8-5 takes 25"
    elif case == "labels-missing":
        args, want = ["-o", "params.labels=targets"], "no dataset 'targets'"
    elif case == "eval-missing":
        args, want = ["-o", "params.eval=heldout"], "no held-out group 'heldout'.*params.eval: null"
    elif case == "shards":
        args, want = ["-o", "params.data_shards=4"], "4 logical shards cannot be split evenly over 3 ranks"
    elif case == "batch-shards":
        args, want = ["-o", "params.batch=5", "-o", "params.data_shards=6"], "global batch of 15 .* 6 shards"
    elif case == "resume-model":
        ok = train_config(tmp_path, "ok.yaml", **{"params.checkpoint": {"path": "c.h5"}, "repeats": 1})
        assert spmd("run", ok, "--out", "ok", cwd=tmp_path, ranks=3)[0] == 0
        args, want = ["-o", "params.resume=c.h5", "-o", "params.optimizer=sgd"], "made with optimizer = adam"
    elif case == "resume-end":
        ok = train_config(tmp_path, "ok.yaml", **{"params.checkpoint": {"path": "c.h5"}})
        assert spmd("run", ok, "--out", "ok", cwd=tmp_path, ranks=3)[0] == 0
        args, want = ["-o", "params.resume=c.h5"], "at step 40; this config trains 40 steps"
    elif case == "graph-cpu":
        args, want = ["-o", "params.graph=true"], "CUDA graphs need device: gpu"
    elif case == "bf16-cpu":
        args, want = ["-o", "params.precision=bf16"], "params.precision: bf16 runs on the GPU only"
    elif case == "unknown-key":
        args, want = ["-o", "params.bucket_size=4"], "unknown key params.bucket_size"
    elif case == "strong-batch":
        rc, out, err, _ = spmd("scale", config, "--ranks", "1,2,3", cwd=tmp_path, ranks=3)
        assert rc == 2 and "16 samples per rank cannot be split over 3x" in err, err
        return
    rc, out, err, _ = spmd("run", config, *args, cwd=tmp_path, ranks=ranks)
    import re

    assert rc == 2, (rc, err)
    assert re.search(want, err), err
    assert err.count("spmd: error") == 1 and "Traceback" not in err
    assert not (tmp_path / "results/train/report.json").exists()

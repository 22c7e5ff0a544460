"""Injected faults on GPUs with NCCL (2 ranks, one GPU each): a rank stuck while its peer waits on
an NCCL kernel is ended by the watchdog after the NCCL communicator is aborted; raise, oom and nan
end the job naming the rank, as on the CPU (tests/cli/test_faults.py)."""

from __future__ import annotations

import re
import socket

import numpy as np
import pytest
import yaml
from helpers import train_config, watchdog_lines, write_dataset
from mpi_job import spmd

HOST = socket.gethostname()
TIMEOUT_S = 5
LIMIT_S = TIMEOUT_S + 30

pytestmark = [pytest.mark.gpu, pytest.mark.gpus(2)]  # a rank misbehaves beside a peer on its own GPU


@pytest.fixture
def config(tmp_path):
    write_dataset(tmp_path / "x.h5", np.random.default_rng(2).standard_normal(1 << 20).astype(np.float32))
    path = tmp_path / "job.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workload": "reduce",
                "device": "gpu",
                "comm": "nccl",
                "repeats": 2,
                "timeout_s": TIMEOUT_S,
                "output": str(tmp_path / "out"),
                "input": {"path": str(tmp_path / "x.h5"), "dataset": "x"},
            }
        )
    )
    return path


def run(config, fault, *args, cwd=None):
    return spmd("run", config, *args, ranks=2, cwd=cwd, env={"SPMD_FAULT": fault}, timeout=LIMIT_S + 60)


@pytest.mark.parametrize(
    "fault",
    [
        "rank=1,phase=comm,kind=hang",
        "rank=0,phase=compute,kind=hang",  # rank 0 is stuck: its watchdog thread still judges
    ],
)
def test_a_hang_beside_an_nccl_collective_is_ended(config, fault):
    """The peer waits inside its first NCCL allgather: NCCL connects a pair of ranks lazily, on the
    host, at their first call. The watchdog aborts NCCL (the call then fails: an echo, not the
    cause, so exit 4 and the watchdog's message stand) and ends the job."""
    rc, _, err, elapsed = run(config, fault)
    rank = int(fault[5])
    assert rc == 4, err
    lines = watchdog_lines(err)
    assert "not in a collective" in lines[rank] and "phase comm, waiting in nccl allgather" in lines[1 - rank], err
    assert "NcclError" not in err, err
    assert elapsed < LIMIT_S and not (config.parent / "out").exists()


def test_a_raise_on_one_rank_aborts_nccl_and_the_job(config):
    rc, _, err, elapsed = run(config, "rank=1,phase=comm,kind=raise")
    assert rc == 1 and f"rank 1 on {HOST}: injected fault" in err and "phase comm" in err, err
    assert elapsed < LIMIT_S and not (config.parent / "out").exists()


def test_oom_on_the_gpu_is_refused_with_the_numbers(config):
    rc, _, err, _ = run(config, "rank=1,phase=h2d,kind=oom")
    assert rc == 2, err
    assert re.search(
        rf"rank 1 on {re.escape(HOST)}: .* need 2 MiB, the GPU has 512 KiB free: refused before "
        "allocating",
        err,
    ), err


def test_nan_on_the_gpu_is_named_by_the_verification(config):
    rc, _, err, _ = run(config, "rank=0,phase=read,kind=nan")
    assert rc == 3 and f"rank 0 on {HOST}: " in err and "rows 262144-262145: 1 row(s) hold NaN" in err, err


def test_a_hang_in_captured_training_steps_is_ended(tmp_path):
    """train captures its steps in a CUDA graph: the peer of a stuck rank waits on the graph's NCCL
    allreduce at the device synchronisation that ends a window."""
    config = train_config(tmp_path, timeout_s=TIMEOUT_S, device="gpu")
    assert spmd("generate", config, cwd=tmp_path, ranks=1)[0] == 0
    rc, _, err, elapsed = run(config, "rank=1,phase=compute,kind=hang", cwd=tmp_path)
    assert rc == 4, err
    lines = watchdog_lines(err)
    assert "phase compute, not in a collective" in lines[1] and "waiting in" in lines[0], err
    assert elapsed < LIMIT_S + 30  # CuPy + NCCL start-up and graph capture come first

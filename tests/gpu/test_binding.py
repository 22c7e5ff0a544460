"""GPU binding by node-local rank, and the refusal of two ranks on one GPU (needs >= 1 GPU)."""

import json

import numpy as np
import pytest
import yaml
from helpers import write_dataset
from mpi_job import spmd

pytestmark = pytest.mark.gpu


@pytest.fixture
def config(tmp_path):
    write_dataset(tmp_path / "x.h5", np.arange(1000, dtype=np.float32))
    path = tmp_path / "job.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "workload": "reduce",
                "device": "gpu",
                "repeats": 1,
                "input": {"path": str(tmp_path / "x.h5"), "dataset": "x"},
                "output": str(tmp_path / "out"),
            }
        )
    )
    return path


def test_two_ranks_on_one_gpu_are_refused_unless_allowed(config):
    one_gpu = {"CUDA_VISIBLE_DEVICES": "0"}
    rc, _, err, _ = spmd("run", config, ranks=2, env=one_gpu)
    assert rc == 2 and "ranks 0 and 1 both landed on GPU" in err, err
    rc, _, err, _ = spmd("run", config, "-o", "allow_shared_gpu=true", "-o", "comm=nccl", ranks=2, env=one_gpu)
    assert rc == 2 and "nccl cannot run several ranks on one GPU" in err, err
    rc, _, err, _ = spmd("run", config, "-o", "allow_shared_gpu=true", ranks=2, env=one_gpu)
    assert rc == 0, err
    report = json.loads((config.parent / "out" / "report.json").read_text())
    assert report["comm"] == "mpi" and [d["device_id"] for d in report["nodes"][0]["devices"]] == [0, 0]


def test_ranks_bind_by_local_rank(config):
    from spmd.core import xp as xpmod

    ranks = min(2, xpmod.gpu_count())
    rc, _, err, _ = spmd("run", config, ranks=ranks)
    assert rc == 0, err
    report = json.loads((config.parent / "out" / "report.json").read_text())
    devices = report["nodes"][0]["devices"]
    assert [d["device_id"] for d in devices] == list(range(ranks))
    assert all(d["name"].startswith("NVIDIA") for d in devices) and report["comm"] == "nccl"


def test_ranks_sharing_one_gpu_measure_the_hosts_reads_by_direct(tmp_path):
    """``spmd bench comm --host-read`` with 2 ranks on one GPU (what a one-GPU machine has): no collective, the
    ranks allowed to share it, the host's reads measured by direct alone (mapped's bytes go to the device: ranks
    sharing one would time its one link, not the host), the file a preset target's key host_read reads."""
    from spmd.scale.prediction.machines import read_host_read

    out = tmp_path / "reads.json"
    args = ("bench", "comm", "--host-read", "--read-bytes", "64M", "--json", out)
    rc, stdout, err, _ = spmd(*args, ranks=2, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert rc == 0, err
    data = json.loads(out.read_text())
    assert (data["device"], data["gpus"], data["shared_gpu"], data["ranks"]) == ("gpu", 1, True, 2)
    reads = data["host_read"]
    assert reads["engine"] == "direct" and set(reads["engines"]) == {"direct"} and reads["readers"] == 2
    assert reads["together_Bps"] > 0 and reads["alone_Bps"] > 0
    words = "spmd bench comm --host-read, 2 rank(s) reading at once over 1 GPU(s) a host shared by its ranks"
    assert read_host_read(out) == (reads, words)
    assert "1 GPU(s) a host shared by its ranks" in stdout and "by direct" in stdout
    # the link test needs a GPU a rank: refused, pointing at the host-read test
    rc, _, err, _ = spmd("bench", "comm", "--links", ranks=2, env={"CUDA_VISIBLE_DEVICES": "0"})
    assert rc == 2 and "both landed on GPU" in err and "spmd bench comm --host-read" in err, err

"""workload torch on one GPU: every strategy and precision runs and verifies against the one-process reference,
SyncBatchNorm, and running out of GPU memory names the batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="workload torch needs PyTorch")

from mpi_job import spmd  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path, example: str, *overrides, ranks=1):
    rc, out, err, _ = spmd("generate", ROOT / f"examples/torch/{example}.yaml", cwd=tmp_path, ranks=1, timeout=300)
    assert rc == 0, err
    (tmp_path / "examples/torch").mkdir(parents=True, exist_ok=True)
    for name in ("mlp.py", "cnn.py"):
        (tmp_path / "examples/torch" / name).write_text((ROOT / "examples/torch" / name).read_text())
    args = [x for o in ("device=gpu", "params.save=null", "repeats=2", *overrides) for x in ("-o", o)]
    rc, out, err, _ = spmd(
        "run", ROOT / f"examples/torch/{example}.yaml", *args, cwd=tmp_path, ranks=ranks, timeout=300
    )
    report = tmp_path / f"results/torch/{example}/report.json"
    return rc, err, json.loads(report.read_text()) if rc == 0 else None


@pytest.mark.parametrize("strategy", ["ddp", "compile", "ddp-graph"])
@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_strategies_and_precisions_verify(tmp_path, strategy, precision):
    rc, err, rep = run(tmp_path, "mlp-medium", f"params.strategy={strategy}", f"params.precision={precision}")
    assert rc == 0, err
    assert rep["verified"] and rep["device"] == "gpu" and rep["result"]["backend"] == "nccl"
    assert rep["result"]["strategy"] == strategy and rep["result"]["data_placement"] == "device"
    libraries = rep["result"]["libraries"]  # which NCCL and cuBLAS DDP ran on, and NCCL's version as PyTorch says
    assert libraries["nccl_version"].startswith("2.") and libraries["nccl"] and libraries["cublas"]
    v = rep["verification"]
    assert v["parameter_relative_rms_error"] <= v["parameter_tolerance"]
    if strategy != "ddp-graph":
        assert rep["timings"]["comm_overlapped"]["median"] >= 0 and rep["timings"]["forward"]["median"] > 0
    assert rep["timings"]["step"]["median"] > 0


def test_sync_batchnorm_cnn_verifies(tmp_path):
    rc, err, rep = run(tmp_path, "cnn", "params.sync_batchnorm=true", "params.options.dropout=0.0")
    assert rc == 0, err
    assert rep["verified"]


def test_out_of_gpu_memory_names_the_batch(tmp_path):
    rc, err, _ = run(tmp_path, "mlp-large", "params.batch=8000000", "params.data_shards=1", "params.steps=1")
    assert rc == 2, err
    assert "out of GPU memory" in err and "params.batch 8000000" in err and "free" in err

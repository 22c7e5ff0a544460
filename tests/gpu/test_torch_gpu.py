"""workload torch on one GPU: every strategy and precision runs and verifies against the one-process reference,
SyncBatchNorm, and running out of GPU memory names the batch."""

from __future__ import annotations

import gzip
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
    g = rep["verification"]["gradients"]
    assert g["largest_error_in_bounds"] <= 1 and g["steps"][0] == 0
    if strategy != "ddp-graph":
        assert rep["timings"]["comm_overlapped"]["median"] >= 0 and rep["timings"]["forward"]["median"] > 0
    assert rep["timings"]["step"]["median"] > 0


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.gpus(2))])
def test_sync_batchnorm_cnn_verifies(tmp_path, ranks):
    """At 2 GPUs the one-process reference on rank 0 runs SyncBatchNorm's statistics alone: it must not wait in
    SyncBatchNorm's collective (it did: NCCL's watchdog ended the job after 300 s). Its layers' forwards are timed as
    their own phase (comm_syncbn), inside the step and out of forward."""
    rc, err, rep = run(tmp_path, "cnn", "params.sync_batchnorm=true", "params.options.dropout=0.0", ranks=ranks)
    assert rc == 0, err
    assert rep["verified"] and rep["ranks"] == ranks
    assert rep["verification"]["gradients"]["largest_error_in_bounds"] <= 1
    t = rep["timings"]
    assert 0 < t["comm_syncbn"]["median"] < t["step"]["median"]


def test_out_of_gpu_memory_names_the_batch(tmp_path):
    rc, err, _ = run(tmp_path, "mlp-large", "params.batch=8000000", "params.data_shards=1", "params.steps=1")
    assert rc == 2, err
    assert "out of GPU memory" in err and "params.batch 8000000" in err and "free" in err


def real_model(tmp_path, model: str, *overrides, ranks=1, env=None, row: str | None = None):
    """(exit code, stderr, report or None) of examples/torch/gpt2.yaml or resnet.yaml (full-size GPT-2 124M or
    torchvision's ResNet-50) on few rows of ``row``'s shape (by default 256 tokens, 3 x 64 x 64 pixels) and steps."""
    config = ROOT / f"examples/torch/{'gpt2' if model == 'gpt2' else 'resnet'}.yaml"
    rows = ["-o", f"generate.shape=[256, {row or ('256' if model == 'gpt2' else '3, 64, 64')}]"]
    rc, _, err, _ = spmd("generate", config, *rows, cwd=tmp_path, ranks=1, timeout=300)
    assert rc == 0, err
    picked = ["params.model=examples/torch/resnet.py:torchvision_resnet50"] if model == "resnet50" else []
    (tmp_path / "examples/torch").mkdir(parents=True, exist_ok=True)
    for name in ("gpt2.py", "resnet.py"):
        (tmp_path / "examples/torch" / name).write_text((ROOT / "examples/torch" / name).read_text())
    args = [x for o in ("device=gpu", "repeats=1", "params.steps=3", *picked, *overrides) for x in ("-o", o)]
    rc, _, err, _ = spmd("run", config, *rows, *args, cwd=tmp_path, ranks=ranks, timeout=600, env=env)
    folder = "gpt2" if model == "gpt2" else "resnet"
    report = tmp_path / f"results/torch/{folder}/report.json"
    return rc, err, json.loads(report.read_text()) if rc == 0 else None


REAL = [("gpt2", "bf16"), ("gpt2", "fp32"), ("resnet50", "bf16")]


@pytest.mark.parametrize("model, precision", REAL)
def test_a_full_size_real_model_verifies_with_every_ranks_gradient_checked(tmp_path, model, precision):
    rc, err, rep = real_model(tmp_path, model, f"params.precision={precision}")
    assert rc == 0, err
    g = rep["verification"]["gradients"]
    assert rep["verified"] and g["steps"][0] == 0 and "deterministic" in g["kernels"]
    first = [c for c in g["checks"] if c["step"] == 0]
    assert g["largest_error_in_bounds"] <= 1 and min(c["share_caught_at_1_percent"] for c in first) >= 0.99, first


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.gpus(2))])
def test_the_first_steps_averaged_gradient_is_exact_where_the_kernels_are_not_deterministic(tmp_path, ranks):
    """At 32 sequences of 1024 tokens GPT-2's bf16 step takes kernels without a deterministic form (computed again on an
    H200, 135 of its 148 gradients differed, the embeddings' by up to 8%; at 8 x 256 none did): with params.verify_steps
    and verify_per_repeat 0 the first step, whose averaged gradient is checked, runs deterministic kernels in the run
    and in the reference alike: otherwise a flipped rounding fails a correct run where one recomputation showed none,
    and where it showed some, the bound (16 x up to 8%) lets a 1% change of most elements through. Here the bound stays
    at its floor and a 1% change of one element on the last rank is caught (2 H200s: the run that had failed)."""
    large = ("params.precision=bf16", "params.verify_steps=0", "params.verify_per_repeat=0", "params.batch=32")
    rc, err, rep = real_model(tmp_path, "gpt2", *large, row="1024", ranks=ranks)
    assert rc == 0, err
    g = rep["verification"]["gradients"]
    assert rep["verified"] and g["steps"] == [0] and g["kernels"].startswith("deterministic"), g
    assert g["measured_rounding"] == 0 and g["largest_error_in_bounds"] <= 1, g
    assert g["share_caught_at_1_percent"] >= 0.99, g["smallest_change_caught"]
    fault = {"SPMD_FAULT": f"rank={ranks - 1},phase=backward,kind=corrupt"}
    (tmp_path / "fault").mkdir()
    rc, err, _ = real_model(tmp_path / "fault", "gpt2", *large, row="1024", ranks=ranks, env=fault)
    assert rc == 3 and "the first step's averaged gradient of" in err, err


@pytest.mark.parametrize("model, precision", REAL)
def test_one_element_one_percent_off_fails_a_full_size_model(tmp_path, model, precision):
    rc, err, _ = real_model(
        tmp_path, model, f"params.precision={precision}", env={"SPMD_FAULT": "rank=0,phase=backward,kind=corrupt"}
    )
    assert rc == 3 and "step 0: rank 0's gradient of" in err, err


@pytest.mark.gpus(2)
@pytest.mark.parametrize("model", ["gpt2", "resnet50"])
def test_two_gpus_verify_and_catch_one_element_on_rank_1(tmp_path, model):
    rc, err, rep = real_model(tmp_path, model, ranks=2)
    assert rc == 0, err
    g = rep["verification"]["gradients"]
    first = [c for c in g["checks"] if c["step"] == 0]
    assert {c["rank"] for c in g["checks"]} == {0, 1} and min(c["share_caught_at_1_percent"] for c in first) >= 0.99
    rc, err, _ = real_model(tmp_path, model, ranks=2, env={"SPMD_FAULT": "rank=1,phase=backward,kind=corrupt"})
    assert rc == 3 and "rank 1's gradient of" in err, err


@pytest.mark.gpus(2)
@pytest.mark.parametrize(
    "fault, cause",
    [
        ("rank=1,phase=compute,kind=hog", "host"),
        ("rank=1,phase=compute,kind=work,seconds=0.01", "more work"),
        ("rank=1,phase=data,kind=slow,seconds=0.01", "data"),
    ],
)
def test_a_cause_made_on_rank_1_of_two_gpus_is_named_from_the_captured_kernels(tmp_path, fault, cause):
    """3 repeats: the fewest from which the timed repeats name a straggler (1 names none)."""
    rc, err, rep = real_model(
        tmp_path, "gpt2", "verify=none", "capture.steps=2", "repeats=3", ranks=2, env={"SPMD_FAULT": fault}
    )
    assert rc == 0, err
    s = rep["breakdown"]["straggler"]
    assert s["rank"] == 1 and s["cause"] == cause, s
    k = rep["kernels"]
    assert (
        k["device"] == "gpu"
        and k["collectives"]["matched"]
        and k["collectives"]["wait_us"][1] < k["collectives"]["wait_us"][0]
    )
    for r in k["per_rank"]:
        m = r["median"]
        assert m["kernels"] > 1000 and m["launches"] > 900 and m["comm_us"] > 0 and r["capture"]["kept"]
        assert m["busy_us"] + m["idle_us"] == pytest.approx(m["span_us"], rel=1e-6)


def test_one_gpus_captured_steps_are_read_kernel_by_kernel_and_kept(tmp_path):
    """The capture's path on a GPU (report.capture: the window the workload ran, the analysis, the kept file)."""
    rc, err, rep = real_model(tmp_path, "gpt2", "capture.steps=2", "params.steps=4")
    assert rc == 0 and rep["verified"], err
    assert rep["config"]["capture"] == {"steps": 2, "max_mb": 32.0}
    k = rep["kernels"]
    assert k["device"] == "gpu" and k["steps"] == 2 and not k["untimed_collectives"]
    (r,) = k["per_rank"]
    m = r["median"]
    assert m["kernels"] > 1000 and m["launches"] > 900 and m["comm_us"] == 0 and m["compute_us"] > 0
    assert m["busy_us"] + m["idle_us"] == pytest.approx(m["span_us"], rel=1e-6)
    assert r["capture"]["steps"] == 2 and r["capture"]["kept"] and r["capture"]["seconds_per_step"] > 0
    kept = tmp_path / "results/torch/gpt2/kernels/rank0.trace.json.gz"
    trace = json.loads(gzip.decompress(kept.read_bytes()))
    steps = {e["name"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert trace["spmd_rank"] == 0 and len(steps) == 2, steps


@pytest.mark.gpus(2)
def test_the_kept_traces_agree_with_holistic_trace_analysis(tmp_path):
    """HTA on the traces just captured (where the machine has it; the committed fixtures hold the same in CI)."""
    hta = pytest.importorskip("hta.trace_analysis", reason="Holistic Trace Analysis not installed here")
    rc, err, rep = real_model(tmp_path, "resnet50", "verify=none", "capture.steps=2", ranks=2)
    assert rc == 0, err
    folder = tmp_path / "results/torch/resnet/kernels"
    temporal = hta.TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True).get_temporal_breakdown(
        visualize=False
    )
    for r in rep["kernels"]["per_rank"]:
        mine = r["temporal"]
        theirs = temporal[temporal["rank"] == r["rank"]].iloc[0]
        step = mine["span_us"] / r["steps"]
        assert abs(mine["idle_us"] - theirs["idle_time(us)"]) / r["steps"] < 0.05 * step

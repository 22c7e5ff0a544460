"""workload torch through the command line on the CPU (gloo): a model and data nobody in the project wrote train
at 1, 2 and 3 ranks to the same parameters, verified; accumulation; the examples; and every failure a user can
hit ends with its exit code, naming the rank, the file and the name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch", reason="workload torch needs the torch extra (make test installs it)")

from helpers import torch_user_config as config  # noqa: E402
from mpi_job import spmd  # noqa: E402

from spmd.workloads.torch.schedule import steps_words  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def report(folder: Path) -> dict:
    return json.loads((folder / "out/report.json").read_text())


def relative_rms(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).double().pow(2).mean().sqrt() / b[k].double().pow(2).mean().sqrt()) for k in b)


def test_a_users_model_trains_alike_at_1_2_and_3_ranks(tmp_path):
    """The acceptance: the global batch (48) fixed, 1, 2 and 3 ranks (999 rows: uneven shards) train to the same
    parameters within the stated fp32 tolerance, each verified against the one-process reference."""
    path = config(tmp_path)
    saved = {}
    for ranks in (1, 2, 3):
        rc, out, err, _ = spmd(
            "run",
            path,
            "-o",
            f"params.batch={48 // ranks}",
            "-o",
            f"params.save={{path: model-{ranks}.pt}}",
            cwd=tmp_path,
            ranks=ranks,
            timeout=180,
        )
        assert rc == 0, err
        rep = report(tmp_path)
        assert rep["verified"] and rep["ranks"] == ranks
        result, verification = rep["result"], rep["verification"]
        # the first, one drawn in each of the 3 windows while the checks stay within 5% of the wall time, the last
        # (which the last window's draw may have taken)
        steps, budget = verification["checked_steps"], verification["budget"]
        assert budget["share"] == 0.05 and 0 <= budget["draws_left_out"] <= 3
        assert len(steps) - (3 - budget["draws_left_out"]) in (1, 2)
        assert steps[0] == 0 and steps[-1] == result["steps"] - 1
        # the checked steps among the windows' 18, the last step checked in its window (fixed repeats)
        assert result["global_batch"] == 48 and result["steps"] == 18 and result["backend"] == "gloo"
        assert result["libraries"] == {"torch": torch.__version__}  # no NCCL or cuBLAS on a CPU run
        assert result["parameters"] == sum(
            p.numel()
            for p in torch.load(tmp_path / f"model-{ranks}.pt").values()
            if p.is_floating_point() and p.dim() > 0
        )
        checks = verification["gradients"]["checks"]  # every rank's own gradient at every checked step
        assert sorted((c["step"], c["rank"]) for c in checks) == [(s, r) for s in steps for r in range(ranks)]
        assert all(c["by"] == (c["rank"] + 1) % ranks for c in checks)  # the next rank recomputes it
        assert min(c["share_caught_at_1_percent"] for c in checks if c["step"] == 0) >= 0.99
        assert verification["parameters"]["checked"] and verification["parameters"]["steps"] == steps
        # the checked steps ran inside the repeats, untimed: the run's wall time counts them as verification's
        assert rep["wall"]["verify"] >= 0.5 * verification["checked_steps_seconds"] > 0
        # and so does its part of set-up (the recomputation's copy of the model), moved out of set-up's
        assert verification["setup_seconds"] > 0
        assert rep["wall"]["verify"] >= verification["setup_seconds"] + 0.5 * verification["checked_steps_seconds"]
        assert verification["share_of_wall"] == pytest.approx(rep["wall"]["verify"] / sum(rep["wall"].values()))
        assert f"gradients of every rank checked at steps {steps_words(steps, result['steps'])}," in out.splitlines()[0]
        for phase in ("data", "forward", "backward", "comm_exposed", "comm_overlapped", "optimizer", "step"):
            assert rep["timings"][phase]["median"] >= 0
        assert rep["timings"]["step"]["median"] > 0 and rep["metrics"]["samples_per_s"] > 0
        for rank in rep["per_rank"]:  # nested phases never exceed the repeat that holds them
            for repeat in rank["repeats"]:
                nested = ("step", "data", "forward", "backward", "comm_exposed", "optimizer")
                assert all(repeat[p] <= repeat["total"] for p in nested), repeat
        assert 0 < result["phases_scaled_to_window"] <= 1
        assert result["loss_per_window"][-1] < result["loss_per_window"][0]
        saved[ranks] = torch.load(tmp_path / f"model-{ranks}.pt")
    for ranks in (2, 3):
        assert relative_rms(saved[ranks], saved[1]) < 1e-5, ranks


def test_accumulation_trains_like_the_whole_batch(tmp_path):
    """2 ranks x 2 micro-batches of 6 = 1 rank with a batch of 24: the same parameters."""
    path = config(tmp_path)
    for ranks, batch, acc in ((1, 24, 1), (2, 6, 2)):
        rc, _, err, _ = spmd(
            "run",
            path,
            "-o",
            f"params.batch={batch}",
            "-o",
            f"params.accumulate={acc}",
            "-o",
            f"params.save={{path: m{ranks}.pt}}",
            cwd=tmp_path,
            ranks=ranks,
            timeout=120,
        )
        assert rc == 0, err
    assert relative_rms(torch.load(tmp_path / "m2.pt"), torch.load(tmp_path / "m1.pt")) < 1e-5


def test_the_cnn_example_with_batchnorm_and_dropout_verifies_at_3_ranks(tmp_path):
    rc, _, err, _ = spmd(
        "generate", ROOT / "examples/torch/cnn.yaml", "-o", "generate.shape=[600,3,32,32]", cwd=tmp_path, ranks=1
    )
    assert rc == 0, err
    (tmp_path / "examples/torch").mkdir(parents=True)
    (tmp_path / "examples/torch/cnn.py").write_text((ROOT / "examples/torch/cnn.py").read_text())
    rc, out, err, _ = spmd(
        "run",
        ROOT / "examples/torch/cnn.yaml",
        "-o",
        "generate.shape=[600,3,32,32]",
        "-o",
        "params.batch=8",
        "-o",
        "params.steps=4",
        "-o",
        "repeats=2",
        cwd=tmp_path,
        ranks=3,
        timeout=180,
    )
    assert rc == 0, err
    rep = json.loads((tmp_path / "results/torch/cnn/report.json").read_text())
    assert rep["verified"] and rep["verification"]["buffers"].startswith("rank 0's")
    state = torch.load(tmp_path / "results/torch/cnn/model.pt")
    steps = rep["result"]["steps"]  # the 3 windows' 12 steps, the checked ones among them
    assert steps == 12 and rep["verification"]["checked_steps"][-1] == 11
    assert "1.running_mean" in state and state["1.num_batches_tracked"] == steps


def test_a_save_keeps_a_users_file_and_replaces_its_own(tmp_path):
    path = config(tmp_path, save={"path": "model.pt"})
    (tmp_path / "model.pt").write_bytes(b"my own weights")
    rc, _, err, _ = spmd("run", path, cwd=tmp_path, ranks=2, timeout=120)
    assert rc == 2 and "model.pt" in err and "not written by spmd" in err
    assert (tmp_path / "model.pt").read_bytes() == b"my own weights"
    (tmp_path / "model.pt").unlink()
    for _ in range(2):  # the second run replaces the first's save: it carries spmd's record
        rc, _, err, _ = spmd("run", path, cwd=tmp_path, ranks=2, timeout=120)
        assert rc == 0, err
    assert torch.load(tmp_path / "model.pt")["out.weight"].shape == (4, 32)


def test_corrupt_gradient_on_one_rank_fails_verification(tmp_path):
    path = config(tmp_path)
    rc, _, err, _ = spmd(
        "run",
        path,
        "-o",
        "params.batch=16",
        cwd=tmp_path,
        ranks=3,
        timeout=120,
        env={"SPMD_FAULT": "rank=1,phase=backward,kind=corrupt"},
    )
    assert rc == 3, err
    assert "rank 1 on" in err and "step 0: rank 1's gradient of" in err and "recomputed on rank 2" in err, err
    assert "handed to the allreduce" in err
    assert not (tmp_path / "out/report.json").exists()


def test_without_checked_steps_the_averaged_first_gradient_is_checked(tmp_path):
    """No checked step (params.verify_steps and verify_per_repeat 0; as under ddp-graph and SyncBatchNorm, where no
    rank's own gradient is checked) compares the first step's gradient after the allreduce, which still catches the
    1% change on one of 2 ranks."""
    path = config(tmp_path, save=None)
    no_checked_steps = ("-o", "params.verify_steps=0", "-o", "params.verify_per_repeat=0")
    rc, _, err, _ = spmd("run", path, *no_checked_steps, cwd=tmp_path, ranks=2, timeout=120)
    assert rc == 0, err
    g = report(tmp_path)["verification"]["gradients"]
    assert g["steps"] == [0] and "averaged over the ranks" in g["compared"] and "checks" not in g
    fault = {"SPMD_FAULT": "rank=1,phase=backward,kind=corrupt"}
    rc, _, err, _ = spmd("run", path, *no_checked_steps, cwd=tmp_path, ranks=2, timeout=120, env=fault)
    assert rc == 3 and "the first step's averaged gradient of" in err, err


def test_verify_none_is_recorded(tmp_path):
    path = config(tmp_path, save=None)
    rc, _, err, _ = spmd("run", path, "-o", "verify=none", cwd=tmp_path, ranks=2, timeout=120)
    assert rc == 0, err
    rep = report(tmp_path)
    assert rep["verified"] is False and "not checked" in rep["verification"]["reference"]


@pytest.mark.parametrize(
    "override, code, words",
    [
        ("params.model=missing.py:make", 2, ["params.model", "missing.py", "no such file"]),
        ("params.model=net.py:nothing", 2, ["params.model", "net.py has no nothing"]),
        ("params.model=net.py:Net", 2, ["params.model", "net.py:Net raised TypeError"]),
        ("params.model=bad.py:make", 2, ["params.model", "importing bad.py failed", "ZeroDivisionError"]),
        ("params.model=net.py:total_loss", 2, ["params.model", "net.py:total_loss raised TypeError"]),
        ("params.model=notmodule.py:make", 2, ["params.model", "returned a dict, not a torch.nn.Module"]),
        ("params.loss=vector.py:per_sample", 2, ["params.loss", "vector.py:per_sample returned [12]", "not a scalar"]),
        ("params.loss=mse", 2, ["mine.h5:target", "mse takes floating-point targets"]),
        ("params.labels.dataset=short", 2, ["mine.h5:short", "998 rows of targets for 999 rows"]),
        ("params.options.features=13", 2, ["params.model", "forward of a micro-batch", "RuntimeError"]),
        ("params.model=rankwise.py:make", 2, ["rank 1", "different parameters on different ranks", "0.weight"]),
        ("params.optimizer.lr=1.0e+30", 3, ["the loss is", "at step", "training diverged"]),
    ],
)
def test_a_users_mistake_ends_the_job_naming_it(tmp_path, override, code, words):
    path = config(tmp_path)
    (tmp_path / "bad.py").write_text("x = 1 / 0\n")
    (tmp_path / "notmodule.py").write_text("def make(params):\n    return {}\n")
    (tmp_path / "vector.py").write_text(
        "import torch\ndef per_sample(out, y):\n"
        "    return torch.nn.functional.cross_entropy(out, y, reduction='none')\n"
    )
    (tmp_path / "rankwise.py").write_text(
        "import torch\ndef make(params):\n"
        "    r = torch.distributed.get_rank()\n"
        "    return torch.nn.Sequential(torch.nn.Linear(12, 8 + r), torch.nn.ReLU(),"
        " torch.nn.Linear(8 + r, 4))\n"
    )
    with h5py.File(tmp_path / "mine.h5", "a") as f:
        f["short"] = np.zeros(998, np.int64)
    rc, out, err, _ = spmd("run", path, "-o", override, "-o", "params.batch=12", cwd=tmp_path, ranks=2, timeout=120)
    assert rc == code, err
    for word in words:
        assert word in err, (word, err)
    assert "rank" in err and not (tmp_path / "out/report.json").exists()


def test_a_model_too_large_for_one_device_is_refused(tmp_path):
    path = config(tmp_path)
    rc, _, err, _ = spmd(
        "run", path, cwd=tmp_path, ranks=2, timeout=120, env={"SPMD_FAULT": "rank=1,phase=h2d,kind=oom"}
    )
    assert rc == 2 and "rank 1" in err and "data-parallel" in err and "parameters" in err, err


def test_memory_for_the_checks_copies_is_counted_at_set_up(tmp_path):
    path = config(tmp_path)
    rc, _, err, _ = spmd(
        "run", path, cwd=tmp_path, ranks=2, timeout=120, env={"SPMD_FAULT": "rank=1,phase=h2d,kind=oom"}
    )
    assert rc == 2 and "rank 1" in err and "verification's copies at its checked steps" in err, err
    assert "params.verify_per_repeat" in err


def test_without_pytorch_it_says_how_to_install_it(tmp_path):
    path = config(tmp_path)
    fake = tmp_path / "nopytorch/torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named torch (hidden by the test)')\n")
    rc, _, err, _ = spmd("run", path, cwd=tmp_path, ranks=2, timeout=60, env={"PYTHONPATH": str(fake.parent)})
    assert rc == 2 and "pip install 'spmd[torch]'" in err, err


def test_cpu_only_strategies_and_precisions_are_refused_with_the_reason(tmp_path):
    path = config(tmp_path)
    for override, words in (
        ("params.strategy=ddp-graph", "needs device: gpu"),
        ("params.sync_batchnorm=true", "SyncBatchNorm runs on GPUs only"),
        ("params.precision=tf32", "tf32 is a GPU mode"),
    ):
        rc, _, err, _ = spmd("run", path, "-o", override, cwd=tmp_path, ranks=2, timeout=60)
        assert rc == 2 and words in err, (override, err)


def test_compile_and_bf16_run_and_verify_on_the_cpu(tmp_path):
    path = config(tmp_path)
    for override in ("params.strategy=compile", "params.precision=bf16"):
        rc, _, err, _ = spmd("run", path, "-o", override, cwd=tmp_path, ranks=2, timeout=300)
        assert rc == 0, (override, err)
        rep = report(tmp_path)
        assert rep["verified"] and rep["result"]["strategy" if "strategy" in override else "precision"] in override


COUNTED_BUILDS = """

from mpi4py import MPI

built = make


def make(params):  # each build noted in builds-RANK.txt
    with open(f"builds-{MPI.COMM_WORLD.Get_rank()}.txt", "a") as f:
        f.write("built\\n")
    return built(params)
"""


def test_scale_with_a_batch_sweep_writes_the_table_the_fit_and_advice_with_numbers(tmp_path):
    path = config(tmp_path, save=None, steps=4)
    with open(tmp_path / "net.py", "a") as f:
        f.write(COUNTED_BUILDS)
    rc, out, err, _ = spmd(
        "scale",
        path,
        "--batches",
        "8,24",
        "--compare-comm",
        "none",
        "-o",
        "repeats=2",
        cwd=tmp_path,
        ranks=2,
        timeout=300,
    )
    assert rc == 0, err
    scaling = json.loads((tmp_path / "out/scaling/scaling.json").read_text())
    # every rank warmed at once before the first run, the model built then and reused by the six runs' copies
    assert [(tmp_path / f"builds-{rank}.txt").read_text() for rank in (0, 1)] == ["built\n"] * 2
    assert 0 < scaling["cost"]["parts_s"]["warm_start"] < scaling["cost"]["total_s"]
    assert "every rank's warm start " in " ".join(scaling["advice"])
    sweep = scaling["batch_sweep"]
    assert sweep["ranks"] == 2 and [r["batch"] for r in sweep["rows"]] == [8, 24]
    for row in sweep["rows"]:
        assert row["verified"] and row["samples_per_s_1"] > 0 and row["samples_per_s_n"] > 0
        assert row["speedup"] == pytest.approx(row["samples_per_s_n"] / row["samples_per_s_1"])
    model = sweep["model"]
    advice = " ".join(scaling["advice"])
    assert "samples/s of 2 ranks over one rank's" in advice
    decision = scaling["decision"]
    if any(r["suspect"] for r in sweep["rows"]):  # 2 repeats on a shared 2-core machine: noisy points kept out, said
        assert "suspect point, kept out of the step model" in advice
        if all(r["suspect"] for r in sweep["rows"]):
            assert model is None and "two trustworthy batches or more are needed" in advice
            assert decision["lead"] is None and scaling["verdict"].startswith("Verdict: ")
            assert "no trustworthy answer: " in scaling["verdict"] and "the run that would settle it: " in advice
    else:
        assert [p["batch"] for p in model["points"]] == [8, 24] and model["next_ranks"] == 4
        for p in model["points"]:
            assert p["error"] == pytest.approx(p["predicted_speedup"] / p["measured_speedup"] - 1)
        if (decision.get("batch_model") or {"trusted": True})["trusted"]:
            for words in ("step model:", "2 ranks pay off", "accumulate: 2 ->"):
                assert words in advice, words
            assert "at 4 ranks (predicted" in advice or "at 4 ranks: not predicted" in advice
        else:  # noise beyond the flags on 2 shared cores: a model that misses its own points predicts nothing
            assert "step model:" in advice and "the step model misses its own points" in advice
            # where 2 ranks pay off is said from the measurement alone, the prediction refused with its reason
            assert "2 ranks pay off measured " in advice and "; not predicted (the step model misses" in advice
            assert "predicted from per-rank batch" not in advice and "predicted at no per-rank" not in advice
            assert "at 4 ranks" not in advice
    # one answer, in the job's own terms: the verdict first, nothing of the array workloads' model
    assert scaling["training"] and scaling["advice"][0] == scaling["verdict"]
    if decision["lead"]:  # never a suspect point
        lead = next(r for r in sweep["rows"] if r["batch"] == decision["lead"]["batch"])
        assert not lead["suspect"] and "what limits it: " in advice
        assert "on this machine, 2 ranks give " in scaling["verdict"]
    assert scaling["decision"]["host"]["threads"]["per_rank"] == 1  # the share of 2 cores for the 2-rank runs
    # each group size calibrated once: the strong run at 2 ranks probed its links, the batch runs of
    # sizes a series run measured do not measure again (their calibration was measured, and thrown away, before)
    strong = next(r for r in scaling["runs"] if r["ranks"] == 2)
    assert strong["probe"] and strong["report"]["wall"]["calibration"] > 0.01
    assert len(scaling["batch_runs"]) == 4
    assert all(r["report"]["wall"]["calibration"] < 0.01 for r in scaling["batch_runs"]), scaling["batch_runs"]
    # the intervals' levels said once, no line with a level of its own
    assert scaling["advice"][1].startswith("Intervals: every interval in these findings is a run's median")
    assert not any(re.search(r"\d+% interval", line) for line in scaling["advice"]), scaling["advice"]
    for words in (
        "For this problem",
        "per rank above",
        "Break-even (more ranks",
        "file opens",
        "share something",
        "The model misses",
        "The model fits",
        "Comm model (",
        "0.00x",
        "-378",
    ):
        assert words not in advice, words
    md = (tmp_path / "out/scaling/scaling.md").read_text()
    assert "Batch sweep: samples/s at each per-GPU batch, 1 rank and 2" in md and "| 24 |" in md
    assert f"**{scaling['verdict']}**" in md and "-&gt;" not in md and "1 -> 2 ranks" in md
    assert "comm gloo (DDP's allreduce; spmd's own collectives on mpi)" in md
    assert "Break-even: problem size per rank" not in md and not (tmp_path / "out/scaling/model.png").exists()
    html = (tmp_path / "out/scaling/scaling.html").read_text()
    assert "Batch sweep" in html and '<p class="verdict">' in html
    # spmd predict carries the sweep's decision: its verdict as the sweep said it, what every row assumes, each
    # row's per-rank batch, and a break-even that never contradicts a row of its rank count
    target = "gpus_per_node=2,nodes=[1,2],intra=nvlink4,inter=ib-ndr"
    rc, out, err, _ = spmd("predict", "out/scaling/scaling.json", "--target", target, "--out", "p", cwd=tmp_path)
    assert rc == 0, err
    assert f"  the sweep: {scaling['verdict']}" in out.splitlines()
    assert (
        "assumes: each target rank computes like the sweep's (cpu)" in out
        and "2 ranks on 1 node(s), per-rank batch 12:" in out
    )
    predicted = json.loads((tmp_path / "p/scaling.json").read_text())
    assert predicted["verdict"] == scaling["verdict"]  # the same runs, the same decision
    p = predicted["other_machines"][0]
    assert p["sweep"]["verdict"] == scaling["verdict"] and p["sweep"]["answer"] == bool(decision["lead"])
    assert "per-GPU" not in out and "at any size" not in out


@pytest.mark.parametrize(
    "args, words",
    [
        (["--batches", "8,x"], "--batches '8,x': expected comma-separated integers"),
        (["--batches", "0"], "batches must be >= 1"),
    ],
)
def test_scale_refuses_a_bad_batch_list(tmp_path, args, words):
    path = config(tmp_path, save=None)
    rc, _, err, _ = spmd("scale", path, *args, cwd=tmp_path, ranks=2, timeout=60)
    assert rc == 2 and words in err, err


def test_a_batch_sweep_needs_a_workload_with_a_batch(tmp_path):
    cfg = tmp_path / "reduce.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "workload": "reduce",
                "input": {"path": "r.h5", "dataset": "x"},
                "generate": {"shape": [64, 4]},
                "output": "out",
            }
        )
    )
    rc, _, err, _ = spmd("scale", cfg, "--batches", "8", cwd=tmp_path, ranks=2, timeout=60)
    assert rc == 2 and "--batches: workload reduce has no params.batch" in err, err


@pytest.mark.parametrize("example", ["mlp-medium", "mlp-large", "cnn"])
def test_each_example_runs_and_verifies_at_1_2_and_3_ranks(tmp_path, example):
    """The examples' configs as shipped, made small (601 rows: uneven shards), generated by spmd generate."""
    (tmp_path / "examples/torch").mkdir(parents=True)
    for name in ("mlp.py", "cnn.py"):
        (tmp_path / "examples/torch" / name).write_text((ROOT / "examples/torch" / name).read_text())
    config = ROOT / f"examples/torch/{example}.yaml"
    shape = yaml.safe_load(config.read_text())["generate"]["shape"]
    small = [
        "-o",
        f"generate.shape={[601, *shape[1:]]}",
        "-o",
        "params.steps=3",
        "-o",
        "repeats=1",
        "-o",
        "params.save=null",
    ]
    assert spmd("generate", config, *small, cwd=tmp_path, ranks=1)[0] == 0
    for ranks in (1, 2, 3):
        rc, _, err, _ = spmd(
            "run", config, *small, "-o", f"params.batch={12 // ranks}", cwd=tmp_path, ranks=ranks, timeout=240
        )
        assert rc == 0, (ranks, err)
        rep = json.loads((tmp_path / f"results/torch/{example}/report.json").read_text())
        assert rep["verified"] and rep["ranks"] == ranks and rep["result"]["global_batch"] == 12
        first = [c for c in rep["verification"]["gradients"]["checks"] if c["step"] == 0]
        assert min(c["share_caught_at_1_percent"] for c in first) >= 0.99  # later, more gradients are ~0
    # one element 1% off on rank 1, from the first step, in bf16 (its gradients rounded to 8 bits): caught
    rc, _, err, _ = spmd(
        "run",
        config,
        *small,
        "-o",
        "params.batch=6",
        "-o",
        "params.precision=bf16",
        cwd=tmp_path,
        ranks=2,
        timeout=240,
        env={"SPMD_FAULT": "rank=1,phase=backward,kind=corrupt"},
    )
    assert rc == 3 and "step 0: rank 1's gradient of" in err, err


MODELS_AS_THEY_COME = '''
import torch
from torch import nn


class Net(nn.Module):
    """A head the loss never reaches (a pooler, an auxiliary head), and ways a forward can branch."""

    def __init__(self, branch):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 16), nn.GELU(), nn.Linear(16, 4))
        self.extra = nn.Linear(4, 4)
        self.unused = nn.Linear(16, 3) if branch is None else None
        self.branch, self.calls = branch, 0

    def forward(self, x):
        self.calls += 1
        out = self.body(x)
        rank = torch.distributed.get_rank()
        if self.branch == "rank-skips" and rank == 1:  # rank 1 never reaches self.extra
            return out
        if self.branch == "rank-scales" and rank == 1:  # the same parameters, another computation on rank 1
            out = out * 2
        if self.branch == "later" and self.calls > 3:  # a forward that stops using a layer after a few steps
            return out
        return self.extra(out)


def make(params):
    return Net(params["options"].get("branch"))
'''


@pytest.mark.parametrize(
    "branch, override, code, words",
    [
        (None, "params.find_unused=false", 2, ["params.find_unused: false", "unused.bias, unused.weight"]),
        ("rank-skips", None, 2, ["rank 1", "other parameters on rank 1 than on rank 0", "extra.bias, extra.weight"]),
        ("rank-skips", "params.find_unused=true", 3, ["rank 1's gradient of", "before the allreduce"]),
        ("rank-scales", None, 3, ["rank 1's gradient of", "before the allreduce"]),
        ("later", None, 2, ["rank 0", "params.find_unused: the loss of step 2", "find_unused: true"]),
        # step 2 checked: its unfinished reduction is named, never taken for a wrong gradient
        (
            "later",
            "params.verify_steps=3",
            2,
            ["rank 0", "params.find_unused: the loss of step 2", "find_unused: true"],
        ),
    ],
)
def test_models_as_they_come_end_named_never_raw(tmp_path, branch, override, code, words):
    """A parameter no loss reaches is found at set-up and trained the way DDP allows (below), or refused where the
    config says find_unused: false; a forward that reaches other parameters on another rank ends with exit 2 naming
    the rank and the parameters, one that computes otherwise with exit 3 naming the rank; a forward that stops
    using a layer later names the key that allows it. Never DDP's raw error, never a hang."""
    path = config(tmp_path, model="branchy.py:make", options={"branch": branch}, loss="cross_entropy")
    (tmp_path / "branchy.py").write_text(MODELS_AS_THEY_COME)
    args = ["-o", override] if override else []
    rc, _, err, _ = spmd("run", path, *args, "-o", "params.batch=12", cwd=tmp_path, ranks=2, timeout=120)
    assert rc == code, err
    for word in words:
        assert word in err, (word, err)
    assert "Expected to have finished reduction" not in err and "Traceback" not in err


def test_a_head_the_loss_never_reaches_trains_with_find_unused_said(tmp_path):
    path = config(tmp_path, model="branchy.py:make", options={"branch": None}, loss="cross_entropy")
    (tmp_path / "branchy.py").write_text(MODELS_AS_THEY_COME)
    rc, _, err, _ = spmd("run", path, "-o", "params.batch=12", cwd=tmp_path, ranks=2, timeout=120)
    assert rc == 0, err
    rep = report(tmp_path)
    assert rep["verified"] and rep["result"]["find_unused_parameters"] is True
    assert rep["result"]["unused_parameters"] == ["unused.bias", "unused.weight"]
    assert any("find_unused_parameters is on" in w and "unused.bias" in w for w in rep["warnings"])
    saved = torch.load(tmp_path / "out/model.pt") if (tmp_path / "out/model.pt").exists() else None
    assert saved is None or "unused.weight" in saved

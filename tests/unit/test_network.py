"""The float64 gradient check of a float32 run at a ReLU kink: a unit whose pre-activation is
within float32 rounding of 0 is off in the run and on in float64. The reference must take the
run's side (network.relu_sides) or it differentiates another piece of the network and fails a
correct gradient; a wrong gradient must still fail."""

import h5py
import numpy as np
import pytest
from mpi4py import MPI

from spmd.core.runtime import Context
from spmd.job import run_job
from spmd.workloads.registry import job_config_from_dict
from spmd.workloads.train.checkpoint import save_checkpoint
from spmd.workloads.train.layout import Layout
from spmd.workloads.train.network import local_gradient, relu_sides
from spmd.workloads.train.ops import HostOps

WIDTHS = (4, 3, 2)
ROWS = 8


def kinked_problem():
    """Parameters and one batch where hidden unit 0 of row 0 sits on the kink: in float32
    1 + 3e-9 rounds to 1 and the bias -1 leaves exactly 0 (off); in float64 it is 3e-9 (on)."""
    layout = Layout(WIDTHS)
    w = layout.initial(0, np.float64)
    layout.weight(w, 0)[0] = [1.0, 1.0, 0.0, 0.0]
    layout.bias(w, 0)[0] = -1.0
    rng = np.random.default_rng(5)
    x = rng.standard_normal((ROWS, WIDTHS[0])).astype(np.float32)
    x[0] = [1.0, 3e-9, 0.0, 0.0]
    y = rng.integers(0, WIDTHS[-1], ROWS).astype(np.int32)
    return layout, w.astype(np.float32), x, y


def layer_errors(layout, got, want):
    return [
        np.linalg.norm(got[s.start : s.stop] - want[s.start : s.stop]) / np.linalg.norm(want[s.start : s.stop])
        for s in layout.segments
    ]


def test_reference_takes_the_runs_side_of_a_relu_kink():
    layout, w32, x, y = kinked_problem()
    w64, batches, scale = w32.astype(np.float64), [(x, y)], 1 / ROWS
    run, _, _ = local_gradient(layout, HostOps(np.float32), w32, batches, scale, 0)
    own, _, _ = local_gradient(layout, HostOps(np.float64), w64, batches, scale, 0)
    assert layer_errors(layout, run, own)[0] > 1e-2  # float64 alone: the other piece

    sides = relu_sides(layout, HostOps(np.float32), w32, batches, 0)
    assert not sides[0][0][0, 0] and sides[0][0].sum() > 0  # the run left the kinked unit off
    ref, _, differ = local_gradient(layout, HostOps(np.float64), w64, batches, scale, 0, sides=sides)
    assert differ == 1
    assert max(layer_errors(layout, run, ref)) < 1e-6

    wrong = run.copy()
    wrong[layout.segments[0].start] += 1e-3 * np.linalg.norm(ref)  # one wrong element still shows
    assert layer_errors(layout, wrong, ref)[0] > 1e-3


def test_a_float32_run_with_a_unit_on_the_kink_verifies(tmp_path):
    """The whole job: its first batch holds the kinked row; `spmd run` verifies the gradient
    and reports the one unit whose side it took from the run."""
    layout, w32, x, y = kinked_problem()
    data, ckpt = tmp_path / "kink.h5", tmp_path / "start.h5"
    with h5py.File(data, "w") as f:
        f["data"], f["labels"] = x, y
    meta = {
        "widths": list(WIDTHS),
        "dtype": "float32",
        "optimizer": "sgd",
        "global_batch": ROWS,
        "data_shards": 1,
        "seed": 0,
    }
    save_checkpoint(str(ckpt), layout, w32, {"momentum": np.zeros_like(w32)}, 0, meta)
    cfg = job_config_from_dict(
        {
            "workload": "train",
            "device": "cpu",
            "comm": "mpi",
            "warmup": 0,
            "repeats": 1,
            "input": {"path": str(data)},
            "output": str(tmp_path / "out"),
            "params": {
                "model": list(WIDTHS),
                "dtype": "float32",
                "batch": ROWS,
                "steps": 1,
                "data_shards": 1,
                "eval": None,
                "resume": str(ckpt),
            },
        }
    )
    ctx = Context(MPI.COMM_SELF)
    report = run_job(ctx, cfg).report
    ctx.close()
    v = report["verification"]
    assert v["relu_sides_from_run"] == 1 and v["hidden_units"] == ROWS * WIDTHS[1]
    assert max(v["gradient_relative_error"]) < 1e-6 < v["tolerance"]


def test_a_forward_pass_on_other_sides_than_rounding_explains_fails(tmp_path, monkeypatch):
    """Sides that disagree with float64 on many units are a wrong forward pass, not rounding:
    the job stops and names it (here: every unit reported on)."""
    from spmd.core.errors import VerificationError
    from spmd.workloads.train import gradcheck

    def all_on(layout, ops, w, batches, *args):
        return [[np.ones((len(x), width), bool) for width in layout.widths[1:-1]] for x, _ in batches]

    monkeypatch.setattr(gradcheck, "relu_sides", all_on)
    rng = np.random.default_rng(1)
    data = tmp_path / "d.h5"
    rows = 64
    with h5py.File(data, "w") as f:
        f["data"] = rng.standard_normal((rows, 4)).astype(np.float32)
        f["labels"] = rng.integers(0, 2, rows).astype(np.int32)
    cfg = job_config_from_dict(
        {
            "workload": "train",
            "device": "cpu",
            "comm": "mpi",
            "warmup": 0,
            "repeats": 1,
            "input": {"path": str(data)},
            "output": str(tmp_path / "out"),
            "params": {
                "model": [4, 32, 2],
                "dtype": "float32",
                "batch": rows,
                "steps": 1,
                "data_shards": 1,
                "eval": None,
            },
        }
    )
    ctx = Context(MPI.COMM_SELF)
    with pytest.raises(VerificationError, match=r"of 2048 hidden units on the other side of the ReLU"):
        run_job(ctx, cfg)
    ctx.close()
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_diverging_run_fails_naming_batch_and_lr(tmp_path):
    """A learning rate far too high: the weights overflow; the job fails with the global batch
    and lr in the message (weak scaling grows the batch at a fixed lr) and writes no report."""
    from spmd.core.errors import VerificationError

    rng = np.random.default_rng(2)
    data, rows = tmp_path / "d.h5", 64
    with h5py.File(data, "w") as f:
        f["data"] = rng.standard_normal((rows, 4)).astype(np.float32)
        f["labels"] = rng.integers(0, 2, rows).astype(np.int32)
    cfg = job_config_from_dict(
        {
            "workload": "train",
            "device": "cpu",
            "comm": "mpi",
            "warmup": 0,
            "repeats": 1,
            "input": {"path": str(data)},
            "output": str(tmp_path / "out"),
            "params": {
                "model": [4, 32, 2],
                "dtype": "float32",
                "batch": 16,
                "steps": 40,
                "data_shards": 1,
                "eval": None,
                "lr": 1e30,
            },
        }
    )
    ctx = Context(MPI.COMM_SELF)
    with pytest.raises(
        VerificationError,
        match=r"not finite after 40 steps at global batch 16 and lr 1e\+30: "
        r"training diverged",
    ):
        run_job(ctx, cfg)
    ctx.close()
    assert not (tmp_path / "out" / "report.json").exists()

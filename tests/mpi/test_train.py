"""Data-parallel training at 2 and 3 ranks against one rank: N ranks x batch b train to the
same weights as 1 rank x batch N*b, with and without gradient accumulation, with buckets
smaller than one layer, overlapped or not; dropout runs verify on every backend."""

import os

import numpy as np
import pytest
from mpi4py import MPI

from spmd.core.runtime import Context
from spmd.io.generate import generate
from spmd.job import run_job
from spmd.workloads.registry import job_config_from_dict
from spmd.workloads.train.layout import Layout
from spmd.workloads.train.workload import TrainWorkload

WIDTHS = [12, 10, 8, 3]
BATCH = 12  # per rank; 12 logical data shards split over 1, 2, 3 and 4 ranks


@pytest.fixture(scope="module")
def data_path(world, shared_tmp):
    cfg = train_config(shared_tmp, ("cpu", "mpi"), "float64")
    if world.rank == 0:
        generate(cfg, TrainWorkload)
    world.Barrier()
    return cfg.input.path


def train_config(folder, backend, dtype, **params):
    return job_config_from_dict(
        {
            "workload": "train",
            "device": backend[0],
            "comm": backend[1],
            "warmup": 1,
            "repeats": 2,
            "input": {"path": f"{folder}/train.h5"},
            "generate": {"shape": [600, WIDTHS[0]], "seed": 4, "loc": 0.0, "scale": 1.0},
            "params": {
                "model": WIDTHS,
                "dtype": dtype,
                "batch": BATCH,
                "steps": 4,
                "data_shards": 12,
                "lr": 0.1,
                "eval_rows": 200,
                **params,
            },
        }
    )


def train(cfg, comm=None):
    """Run the job on ``comm``'s ranks; (report, final host weights)."""
    ctx = Context(comm)
    job = run_job(ctx, cfg, after_run=lambda _, workload: workload.trainer.host_state()[0])
    ctx.close()
    return job.report, job.extra


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("accumulate", [1, 3])
@pytest.mark.parametrize("overlap", [True, False])
def test_n_ranks_train_like_one_rank_with_n_times_the_batch(
    backend, world, shared_tmp, data_path, dtype, accumulate, overlap
):
    n = world.size
    params = {"accumulate": accumulate, "optimizer": "adam", "lr": 0.01, "bucket_mb": 0.0002, "overlap": overlap}
    report, weights = train(train_config(shared_tmp, backend, dtype, **params))
    one = train_config(shared_tmp, backend, dtype, **{**params, "batch": BATCH * n})
    _, alone = train(one, MPI.COMM_SELF)
    result = report["result"]
    assert result["global_batch"] == BATCH * n * accumulate and result["steps"] == 12
    assert max(result["buckets"]) < 10 * 12 * np.dtype(dtype).itemsize  # smaller than the first layer
    assert len(result["buckets"]) > 3
    assert report["verification"]["replicas_identical"]
    tol = 1e-12 if dtype == "float64" else 2e-5
    moved = np.abs(weights - Layout(WIDTHS).initial(0, dtype)).max()
    np.testing.assert_allclose(weights, alone, rtol=0, atol=tol * np.abs(alone).max())
    assert moved > 0.01  # the weights did train


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("order", ["layers", "inputs_first"])
def test_first_layer_gradient_in_row_blocks_trains_like_one_rank(
    backend, world, shared_tmp, data_path, dtype, overlap, order
):
    """params.split_gradients: layer 0 (40 rows of 12) cut into buckets of 16 rows, its weight gradient computed
    block by block and each block's bucket reduced right after it (last in backward, or first with inputs_first):
    the same weights as one rank with the whole batch (a bucket reduced before its rows were computed, or never,
    would not be)."""
    n = world.size
    params = {
        "model": [12, 40, 8, 3],
        "optimizer": "adam",
        "lr": 0.01,
        "bucket_mb": 0.0002,
        "overlap": overlap,
        "split_gradients": True,
        "backward_order": order,
    }
    report, weights = train(train_config(shared_tmp, backend, dtype, **params))
    _, alone = train(train_config(shared_tmp, backend, dtype, **{**params, "batch": BATCH * n}), MPI.COMM_SELF)
    item = np.dtype(dtype).itemsize
    buckets = report["result"]["buckets"]
    # layer 0: 16 rows, 16 rows, the rest + biases (padded to 192 elements); layers 2 and 1 (no 64-element-aligned
    # row cut fits in them) after it with inputs_first, before it otherwise
    blocks = [16 * 12 * item] * 3
    assert (buckets[:3] if order == "inputs_first" else buckets[2:]) == blocks and len(buckets) == 5, buckets
    assert report["verification"]["replicas_identical"]
    tol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(weights, alone, rtol=0, atol=tol * np.abs(alone).max())
    assert np.abs(weights - Layout([12, 40, 8, 3]).initial(0, dtype)).max() > 0.01


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("overlap", [True, False])
def test_inputs_first_backward_trains_like_one_rank_and_reduces_layer_0_first(
    backend, world, shared_tmp, data_path, overlap
):
    """params.backward_order: inputs_first: the weight gradients from layer 0 up, so layer 0's bucket is reduced
    first; the same weights as one rank with the whole batch (a bucket reduced before its layers were computed
    would differ), and overlapped its allreduce starts before backward ends."""
    n = world.size
    params = {
        "model": [12, 40, 8, 3],
        "optimizer": "adam",
        "lr": 0.01,
        "bucket_mb": 0.003,
        "overlap": overlap,
        "backward_order": "inputs_first",
    }
    report, weights = train(train_config(shared_tmp, backend, "float32", **params))
    _, alone = train(train_config(shared_tmp, backend, "float32", **{**params, "batch": BATCH * n}), MPI.COMM_SELF)
    result = report["result"]
    # 0.003 MiB = 786 floats: layer 0 (40 x 12 + 40 = 520, padded to 576) alone, then layers 1 and 2 (to 1024)
    assert result["buckets"] == [576 * 4, (1024 - 576) * 4], result["buckets"]
    assert report["verification"]["replicas_identical"]
    np.testing.assert_allclose(weights, alone, rtol=0, atol=2e-5 * np.abs(alone).max())
    assert np.abs(weights - Layout([12, 40, 8, 3]).initial(0, "float32")).max() > 0.01
    timeline = result["step_timeline_us"]
    overlapped = overlap and (backend[0] == "cpu" or backend[1] == "nccl")
    assert (timeline["allreduce"][0][0] < timeline["marks"]["b0"]) == overlapped, timeline
    assert result["backward_order"] == "inputs_first"
    assert (result["l2_window"] is not None) == (backend[0] == "gpu")  # the window is the GPU's
    # NCCL ran with graph mixing off unless the environment said otherwise; no NCCL, nothing to say
    assert result["nccl_graph_mixing_support"] == (
        os.environ.get("NCCL_GRAPH_MIXING_SUPPORT", "0") if backend[1] == "nccl" else None
    )


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("split", [False, True])
def test_bucket_by_bucket_updates_train_like_one_rank(backend, world, shared_tmp, data_path, optimizer, split):
    """params.update_per_bucket: on a GPU with NCCL each bucket is updated as soon as its allreduce is done (the
    earlier ones while the last allreduce runs); elsewhere it changes nothing. Either way the same weights as one
    rank with the whole batch: a bucket updated before its allreduce ended, or twice, or never, would differ."""
    n = world.size
    params = {
        "model": [12, 40, 8, 3],
        "optimizer": optimizer,
        "lr": 0.01 if optimizer == "adam" else 0.1,
        "bucket_mb": 0.0002,
        "update_per_bucket": True,
        "split_gradients": split,
    }
    report, weights = train(train_config(shared_tmp, backend, "float32", **params))
    _, alone = train(train_config(shared_tmp, backend, "float32", **{**params, "batch": BATCH * n}), MPI.COMM_SELF)
    assert len(report["result"]["buckets"]) > 3 and report["verification"]["replicas_identical"]
    np.testing.assert_allclose(weights, alone, rtol=0, atol=2e-5 * np.abs(alone).max())
    assert np.abs(weights - Layout([12, 40, 8, 3]).initial(0, "float32")).max() > 0.01


@pytest.mark.mpi(min_size=2)
def test_update_in_backward_waits_for_the_allreduce_on_several_ranks(backend, world, shared_tmp, data_path):
    """params.update_in_backward acts on one rank only: on several an update must wait for its allreduce, so the
    report says it was not used and the weights are those of one rank with the whole batch (it used there)."""
    n = world.size
    params = {"model": [12, 40, 8, 3], "optimizer": "adam", "lr": 0.01, "update_in_backward": True}
    report, weights = train(train_config(shared_tmp, backend, "float32", **params))
    one, alone = train(train_config(shared_tmp, backend, "float32", **{**params, "batch": BATCH * n}), MPI.COMM_SELF)
    assert report["result"]["update_in_backward"] is False and one["result"]["update_in_backward"] is True
    np.testing.assert_allclose(weights, alone, rtol=0, atol=2e-5 * np.abs(alone).max())


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("overlap", [True, False])
def test_the_step_timeline_orders_the_marks_and_every_buckets_allreduce(backend, world, shared_tmp, data_path, overlap):
    """result.step_timeline_us: the last step's marks in order from 0, one [start, end] per bucket, each allreduce
    ending by w (the optimizer needs them all); overlapped, the first bucket's starts before backward ends (inside
    it on the CPU, beside it on a GPU with NCCL), otherwise every one starts after backward."""
    params = {"model": [12, 40, 8, 3], "bucket_mb": 0.0002, "overlap": overlap}
    report, _ = train(train_config(shared_tmp, backend, "float32", **params))
    timeline, buckets = report["result"]["step_timeline_us"], report["result"]["buckets"]
    marks = timeline["marks"]
    assert list(marks)[0] == "s" and marks["s"] == 0 and list(marks)[-1] == "o"
    assert marks["s"] <= marks["f0"] <= marks["b0"] <= marks["w"] <= marks["o"], marks
    assert len(timeline["allreduce"]) == len(buckets) > 3
    for start, end in timeline["allreduce"]:
        assert 0 <= start <= end <= marks["w"] + 1, (timeline, marks)  # 1 us: the marks' rounding
    # host-staged MPI on a GPU reduces after backward whatever params.overlap says (it cannot queue on a stream)
    overlapped = overlap and (backend[0] == "cpu" or backend[1] == "nccl")
    assert (timeline["allreduce"][0][0] < marks["b0"]) == overlapped, timeline


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_dropout_training_verifies_and_learns(backend, world, shared_tmp, data_path, optimizer):
    lr = 0.1 if optimizer == "sgd" else 0.01
    cfg = train_config(shared_tmp, backend, "float32", dropout=0.3, optimizer=optimizer, lr=lr, steps=25)
    report, _ = train(cfg)
    v, result = report["verification"], report["result"]
    assert max(v["gradient_relative_error"]) < v["tolerance"]
    assert result["loss_per_window"][-1] < result["loss_per_window"][0]
    assert 0 < result["eval_accuracy"] <= 1
    phases = report["timings"]
    assert all(phases[p]["median"] > 0 for p in ("forward", "backward", "optimizer", "total"))

"""train's CUDA side: every device primitive against the NumPy one, a whole gradient against
NumPy float64, and a captured CUDA graph training to the same weights as eager steps."""

import numpy as np
import pytest

from spmd.workloads.train.layout import Layout
from spmd.workloads.train.network import local_gradient
from spmd.workloads.train.ops import DeviceOps, HostOps

pytestmark = pytest.mark.gpu


def pair(dtype):
    return DeviceOps(dtype, max_rows=64), HostOps(np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_device_primitives_match_numpy(dtype):
    import cupy

    dev, host = pair(dtype)
    tol = 2e-6 if dtype == np.float32 else 1e-13
    rng = np.random.default_rng(1)

    def both(*arrays):
        return [cupy.asarray(a.astype(dtype)) for a in arrays], [a.astype(np.float64) for a in arrays]

    for ta, tb, beta in [(False, True, 0.0), (True, False, 1.0), (False, False, 0.0)]:
        a = rng.standard_normal((37, 29) if not ta else (29, 37))
        b = rng.standard_normal((23, 29) if tb else (29, 23))
        c = rng.standard_normal((37, 23))
        (da, db, dc), (ha, hb, hc) = both(a, b, c)
        dev.gemm(da, db, dc, ta, tb, beta)
        host.gemm(ha, hb, hc, ta, tb, beta)
        np.testing.assert_allclose(cupy.asnumpy(dc), hc, rtol=tol, atol=tol * 30)
    x = rng.standard_normal((50, 31))
    (dx, dcol), (hx, hcol) = both(x, np.ones(31))
    dev.column_sums(dx, dcol, 1.0)
    host.column_sums(hx, hcol, 1.0)
    np.testing.assert_allclose(cupy.asnumpy(dcol), hcol, rtol=tol, atol=tol * 10)
    counters = np.array([2, 9], np.int64)
    for keep in (1.0, 0.6):
        z, bias = rng.standard_normal((40, 33)), rng.standard_normal(33)
        (dz, dbias), (hz, hbias) = both(z, bias)
        dev.act_forward(dz, dbias, keep, 5, 77, cupy.asarray(counters))
        host.act_forward(hz, hbias, keep, 5, 77, counters)
        np.testing.assert_array_equal(cupy.asnumpy(dz) == 0, hz == 0)  # the same dropout mask and ReLU
        np.testing.assert_allclose(cupy.asnumpy(dz), hz, rtol=tol, atol=tol)
        d = rng.standard_normal((40, 33))
        (dd,), (hd,) = both(d)
        dev.act_backward(dd, dz, keep)
        host.act_backward(hd, hz, keep)
        np.testing.assert_allclose(cupy.asnumpy(dd), hd, rtol=tol, atol=tol)
    z, bias, y = rng.standard_normal((45, 7)) * 3, rng.standard_normal(7), rng.integers(0, 7, 45)
    (dz, dbias, ddz), (hz, hbias, hdz) = both(z, bias, np.zeros((45, 7)))
    dloss, dcorrect = cupy.zeros(45), cupy.zeros(45, np.int32)
    hloss, hcorrect = np.zeros(45), np.zeros(45, np.int32)
    dev.softmax_xent(dz, dbias, cupy.asarray(y.astype(np.int32)), 0.1, ddz, dloss, dcorrect)
    host.softmax_xent(hz, hbias, y, 0.1, hdz, hloss, hcorrect)
    np.testing.assert_allclose(cupy.asnumpy(ddz), hdz, rtol=tol * 10, atol=tol)
    np.testing.assert_allclose(cupy.asnumpy(dloss), hloss, rtol=tol * 10)
    np.testing.assert_array_equal(cupy.asnumpy(dcorrect), hcorrect)
    xs, ys = rng.standard_normal((100, 6)), rng.integers(0, 3, 100).astype(np.int32)
    idx = rng.integers(0, 100, 40).astype(np.int32)
    (dxs,), (hxs,) = both(xs)
    dxb, dyb = cupy.zeros((5, 6), dtype), cupy.zeros(5, np.int32)
    hxb, hyb = np.zeros((5, 6)), np.zeros(5, np.int32)
    dev.gather(dxs, cupy.asarray(ys), cupy.asarray(idx), cupy.asarray(counters), 10, 3, dxb, dyb)
    host.gather(hxs, ys, idx, counters, 10, 3, hxb, hyb)
    np.testing.assert_array_equal(cupy.asnumpy(dxb), hxb.astype(dtype))
    np.testing.assert_array_equal(cupy.asnumpy(dyb), hyb)
    wide = cupy.full((5, 8), cupy.nan, dtype)  # rows 8 apart (train's row pitch): the gaps stay unwritten
    dev.gather(dxs, cupy.asarray(ys), cupy.asarray(idx), cupy.asarray(counters), 10, 3, wide[:, :6], dyb)
    np.testing.assert_array_equal(cupy.asnumpy(wide[:, :6]), hxb.astype(dtype))
    assert cupy.isnan(wide[:, 6:]).all()
    for opt, n in (("sgd", 1000), ("sgd", 1001), ("adam", 1000)):  # float32 sgd: float4s, then one a thread
        w, g, m, v = (rng.standard_normal(n) for _ in range(4))
        v = np.abs(v)
        (dw, dg, dm, dv), (hw, hg, hm, hv) = both(w, g, m, v)
        if opt == "sgd":
            dev.sgd(dw, dg, dm, 0.1, 0.9, None)
            host.sgd(hw, hg, hm, 0.1, 0.9, None)
        else:
            dev.adam(dw, dg, dm, dv, 0.01, 0.9, 0.999, 1e-8, cupy.asarray(counters))
            host.adam(hw, hg, hm, hv, 0.01, 0.9, 0.999, 1e-8, counters)
        np.testing.assert_allclose(cupy.asnumpy(dw), hw, rtol=tol, atol=tol)
        np.testing.assert_allclose(cupy.asnumpy(dm), hm, rtol=tol, atol=tol)
    dc = cupy.asarray(counters)
    dev.advance(dc)
    assert cupy.asnumpy(dc).tolist() == [3, 10]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [8, 16, 64])
def test_fused_layers_match_numpy_and_are_tuned(dtype, rows):
    """cuBLASLt's fused bias + ReLU and bias gradient, on the algorithm the tuner chose, against NumPy float64;
    the accumulate path (no fused bias gradient) too. Outputs are poisoned first, so an unwritten element shows."""
    import cupy

    dev, host = pair(dtype)
    assert dev._lt is not None, "cuBLASLt did not load: train would run on cuBLAS's own heuristic"
    tol = 2e-6 if dtype == np.float32 else 1e-13
    rng = np.random.default_rng(rows)
    x, w, b = rng.standard_normal((rows, 256)), rng.standard_normal((128, 256)) / 16, rng.standard_normal(128)
    dx, dw_, db_ = (cupy.asarray(a.astype(dtype)) for a in (x, w, b))
    out = cupy.full((rows, 128), np.nan, dtype)
    dev.linear_relu(dx, dw_, db_, out)
    want = np.maximum(x @ w.T + b, 0)
    np.testing.assert_allclose(cupy.asnumpy(out), want, rtol=tol * 10, atol=tol * 30)
    delta = rng.standard_normal((rows, 128))
    ddelta = cupy.asarray(delta.astype(dtype))
    gw, gb = cupy.full((128, 256), np.nan, dtype), cupy.full(128, np.nan, dtype)
    dev.weight_gradient(ddelta, dx, gw, gb, accumulate=False)
    np.testing.assert_allclose(cupy.asnumpy(gw), delta.T @ x, rtol=tol * 10, atol=tol * 30)
    np.testing.assert_allclose(cupy.asnumpy(gb), delta.sum(axis=0), rtol=tol * 10, atol=tol * 30)
    dev.weight_gradient(ddelta, dx, gw, gb, accumulate=True)  # a second micro-batch adds
    np.testing.assert_allclose(cupy.asnumpy(gw), 2 * delta.T @ x, rtol=tol * 10, atol=tol * 60)
    np.testing.assert_allclose(cupy.asnumpy(gb), 2 * delta.sum(axis=0), rtol=tol * 10, atol=tol * 60)
    plans = [p for p in dev._lt.plans.values() if p is not None]
    assert {p.epilogue for p in plans} >= {"bias_relu", "bias_grad", "none"}
    assert any(p.tuned_us is not None for p in plans), "no GEMM was timed: the tuner did not run"
    dev.close()


@pytest.mark.parametrize("rows", [8, 64])
def test_bf16_primitives_match_numpy_on_the_rounded_operands(rows):
    """precision bf16: the parameter cast is bit-exact with the host's rounding; the fused GEMMs take bfloat16
    operands and match float64 on the same rounded values (one bfloat16 rounding of the output, float32
    accumulation in the weight gradient); the element kernels read and write bfloat16."""
    import cupy

    from spmd.workloads.train.ops import BF16, bf16_bits, bf16_values

    dev = DeviceOps(np.float32, precision="bf16", max_rows=64)
    rng = np.random.default_rng(rows)
    w32 = (rng.standard_normal(4099) * 3).astype(np.float32)
    cast = cupy.full(4099, 0xFFFF, BF16)
    dev.to_storage(cupy.asarray(w32), cast)
    np.testing.assert_array_equal(cupy.asnumpy(cast), bf16_bits(w32))

    def rounded(a):
        return bf16_values(bf16_bits(a.astype(np.float32))).astype(np.float64)

    x, w, b = rng.standard_normal((rows, 256)), rng.standard_normal((128, 256)) / 16, rng.standard_normal(128)
    dx, dw_, db_ = (dev.stage(a.astype(np.float32)) for a in (x, w, b))
    out = cupy.full((rows, 128), 0xFFFF, BF16)  # NaN
    dev.linear_relu(dx, dw_, db_, out)
    want = np.maximum(rounded(x) @ rounded(w).T + rounded(b), 0)
    np.testing.assert_allclose(bf16_values(cupy.asnumpy(out)), want, rtol=2**-8, atol=1e-5)
    delta = rng.standard_normal((rows, 128))
    ddelta = dev.stage(delta.astype(np.float32))
    gw, gb = cupy.full((128, 256), np.nan, np.float32), cupy.full(128, np.nan, np.float32)
    dev.weight_gradient(ddelta, dx, gw, gb, accumulate=False)
    np.testing.assert_allclose(cupy.asnumpy(gw), rounded(delta).T @ rounded(x), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(cupy.asnumpy(gb), rounded(delta).sum(axis=0), rtol=1e-5, atol=1e-4)
    d, a = rng.standard_normal((rows, 33)), rng.standard_normal((rows, 33))
    dd, da = dev.stage(d.astype(np.float32)), dev.stage(a.astype(np.float32))
    dev.act_backward(dd, da, 0.5)
    np.testing.assert_allclose(bf16_values(cupy.asnumpy(dd)), np.where(rounded(a) > 0, rounded(d) * 2, 0), rtol=2**-8)
    z, bias, y = rng.standard_normal((rows, 7)) * 3, rng.standard_normal(7), rng.integers(0, 7, rows)
    dz = cupy.full((rows, 7), 0xFFFF, BF16)
    loss, correct = cupy.zeros(rows), cupy.zeros(rows, np.int32)
    dev.softmax_xent(
        cupy.asarray(z.astype(np.float32)),
        dev.stage(bias.astype(np.float32)),
        cupy.asarray(y.astype(np.int32)),
        0.1,
        dz,
        loss,
        correct,
    )
    hdz, hloss, hcorrect = np.zeros((rows, 7)), np.zeros(rows), np.zeros(rows, np.int32)
    HostOps(np.float64).softmax_xent(
        z.astype(np.float32).astype(np.float64), rounded(bias), y, 0.1, hdz, hloss, hcorrect
    )
    np.testing.assert_allclose(bf16_values(cupy.asnumpy(dz)), hdz, rtol=2**-8, atol=1e-7)
    np.testing.assert_allclose(cupy.asnumpy(loss), hloss, rtol=1e-5)
    dev.close()


def test_bf16_gradient_matches_float64_on_the_rounded_weights_and_inputs():
    """A whole bf16 gradient (dropout on, two micro-batches) against float64 from the same bfloat16 weights and
    inputs, taking the run's ReLU sides as the workload's check does: within its tolerance, far from 1."""
    import cupy

    from spmd.workloads.train.gradcheck import GRADIENT_RTOL
    from spmd.workloads.train.network import relu_sides
    from spmd.workloads.train.ops import bf16_bits, bf16_values

    widths = (42, 36, 16, 6)  # 42 and 36 bfloat16 values are not whole 16 bytes: W rows 48 and 40 apart
    layout, packed = Layout(widths, operand_itemsize=2), Layout(widths)  # the reference's rows back to back
    assert [s.pitch for s in layout.segments] == [48, 40, 16]
    w = layout.initial(2, np.float32)
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((24, 42)).astype(np.float32), rng.integers(0, 6, 24)) for _ in range(2)]
    dev = DeviceOps(np.float32, precision="bf16", max_rows=24)
    w16 = dev.stage(w)
    got, _, _ = local_gradient(layout, dev, w16, batches, 1 / 48, 3, keep=0.75, seed=1)
    sides = relu_sides(layout, dev, w16, batches, 3, keep=0.75, seed=1)
    ref_batches = [(bf16_values(bf16_bits(x)).astype(np.float64), y) for x, y in batches]
    want, _, differ = local_gradient(
        packed,
        HostOps(np.float64),
        bf16_values(bf16_bits(packed.initial(2, np.float32))).astype(np.float64),
        ref_batches,
        1 / 48,
        3,
        keep=0.75,
        seed=1,
        sides=sides,
    )
    got = cupy.asnumpy(got)
    assert np.count_nonzero(got) == np.count_nonzero(np.concatenate(layout.real(got)))  # no padding written
    errors = []
    for layer in range(layout.layers):
        mine = np.concatenate([layout.weight(got, layer).ravel(), layout.bias(got, layer)])
        ref = np.concatenate([packed.weight(want, layer).ravel(), packed.bias(want, layer)])
        errors.append(np.linalg.norm(mine - ref) / np.linalg.norm(ref))
    assert max(errors) < GRADIENT_RTOL["bf16"] and differ <= 2, (errors, differ)
    assert max(errors) > 1e-5, errors  # bfloat16 really was used (float32 lands near 1e-7)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_device_gradient_matches_numpy_float64(dtype, tol):
    import cupy

    layout = Layout((40, 32, 16, 6))
    w = layout.initial(2, np.float64)
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((24, 40)), rng.integers(0, 6, 24)) for _ in range(2)]
    want, want_loss, _ = local_gradient(layout, HostOps(np.float64), w, batches, 1 / 48, 3, keep=0.75, seed=1)
    dev = DeviceOps(dtype, max_rows=24)
    got, loss, _ = local_gradient(layout, dev, cupy.asarray(w.astype(dtype)), batches, 1 / 48, 3, keep=0.75, seed=1)
    got = cupy.asnumpy(got)
    for s in layout.segments:
        err = np.linalg.norm(got[s.start : s.stop] - want[s.start : s.stop]) / np.linalg.norm(want[s.start : s.stop])
        assert err < tol, (s.layer, err)
    assert loss == pytest.approx(want_loss, rel=tol * 10)


def small_train(tmp_path, graph, width=40, **params):
    from spmd.workloads.registry import job_config_from_dict

    return job_config_from_dict(
        {
            "workload": "train",
            "device": "gpu",
            "warmup": 1,
            "repeats": 2,
            "input": {"path": str(tmp_path / "t.h5")},
            "generate": {"shape": [3000, width], "seed": 1, "loc": 0.0, "scale": 1.0},
            "params": {
                "model": [width, 64, 32, 6],
                "batch": 32,
                "accumulate": 2,
                "steps": 20,
                "dropout": 0.1,
                "optimizer": "adam",
                "lr": 0.003,
                "graph": graph,
                "eval_rows": 500,
                **params,
            },
        }
    )


def run_both(tmp_path, **params):
    """The same training as graph replays and as eager steps (two jobs of one process): their weights."""
    from spmd.core.runtime import Context
    from spmd.io.generate import generate
    from spmd.job import run_job
    from spmd.workloads.train.workload import TrainWorkload

    generate(small_train(tmp_path, True, **params), TrainWorkload)
    runs = {}
    for graph in (True, False):
        ctx = Context()
        runs[graph] = run_job(
            ctx, small_train(tmp_path, graph, **params), after_run=lambda _, wl: wl.trainer.host_state()[0]
        )
        ctx.close()
    assert runs[True].report["result"]["graph"] and not runs[False].report["result"]["graph"]
    return runs


def test_bf16_training_is_verified_and_learns(tmp_path):
    """precision bf16 end to end, with the input rows padded to 16 bytes: the gradient check at its tolerance, the
    eager re-run of the last window and the replicas pass (run_job raises otherwise), graph and eager steps end on
    the same weights, the loss falls."""
    runs = run_both(tmp_path, width=44, precision="bf16")  # 44 bfloat16 inputs: rows 48 apart
    report = runs[True].report
    assert report["verified"] and report["result"]["precision"] == "bf16"
    errors = report["verification"]["gradient_relative_error"]
    assert 1e-5 < max(errors) < report["verification"]["tolerance"], errors
    np.testing.assert_allclose(runs[True].extra, runs[False].extra, rtol=1e-6, atol=1e-7)
    losses = report["result"]["loss_per_window"]
    assert losses[-1] < 0.9 * losses[0], losses


@pytest.mark.parametrize("backward_order", ["layers", "inputs_first"])
def test_updating_layers_on_a_second_stream_inside_backward_trains_to_the_same_weights(tmp_path, backward_order):
    """params.update_in_backward on one GPU: each layer's update on the update stream once backward is done with
    it, captured in the step's graph and eager, ends on the weights of one update after backward (a race, an
    update before backward's last read of W, or a missing join would not)."""
    on = run_both(tmp_path, update_in_backward=True, backward_order=backward_order, optimizer="sgd")
    off = run_both(tmp_path, update_in_backward=False, backward_order=backward_order, optimizer="sgd")
    assert on[True].report["result"]["update_in_backward"] and not off[True].report["result"]["update_in_backward"]
    for graph in (True, False):
        np.testing.assert_allclose(on[graph].extra, off[graph].extra, rtol=1e-6, atol=1e-7)


def test_captured_graph_trains_to_the_eager_weights(tmp_path):
    runs = run_both(tmp_path)
    np.testing.assert_allclose(runs[True].extra, runs[False].extra, rtol=1e-6, atol=1e-7)
    phases = runs[True].report["timings"]
    assert all(phases[p]["median"] > 0 for p in ("forward", "backward", "optimizer")), phases


def test_inputs_first_trains_to_the_layers_weights_inside_its_l2_window(tmp_path):
    """backward_order: inputs_first on the GPU: graph and eager steps end on the same weights, as the default
    order's run does layer by layer (the same GEMMs in another order); the report names the L2 window the run
    held, and closing the job gives the persisting carve-out back."""
    import cupy

    from spmd.core.runtime import Context
    from spmd.job import run_job
    from spmd.workloads.train.layout import Layout

    carve_out = cupy.cuda.runtime.deviceGetLimit(0x06)  # cudaLimitPersistingL2CacheSize
    first = run_both(tmp_path, backward_order="inputs_first")
    window = first[True].report["result"]["l2_window"]
    assert window["failure"] is None and 0 < window["persisting_bytes"] <= window["bytes"], window
    assert cupy.cuda.runtime.deviceGetLimit(0x06) == carve_out  # put back
    np.testing.assert_allclose(first[True].extra, first[False].extra, rtol=1e-6, atol=1e-7)
    ctx = Context()
    layers = run_job(ctx, small_train(tmp_path, True), after_run=lambda _, wl: wl.trainer.host_state()[0])
    ctx.close()
    assert layers.report["result"]["l2_window"] is None
    widths = (40, 64, 32, 6)
    for layer in range(3):
        np.testing.assert_allclose(
            Layout(widths, True).weight(first[True].extra, layer),
            Layout(widths).weight(layers.extra, layer),
            rtol=1e-5,
            atol=1e-6,
        )

"""The train workload's pieces on one process: gradients against finite differences, the
optimizers against their textbook formulas, bucket planning, the sample order, checkpoints."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spmd.core.errors import ConfigError, InputError
from spmd.workloads.registry import job_config_from_dict
from spmd.workloads.train.buckets import plan_buckets
from spmd.workloads.train.checkpoint import load_checkpoint, mark_failed, save_checkpoint
from spmd.workloads.train.layout import ALIGN, PRESETS, Layout
from spmd.workloads.train.network import Network, local_gradient
from spmd.workloads.train.ops import HostOps, keep_mask
from spmd.workloads.training.data import Sampler

WIDTHS = (7, 6, 5, 4)


def batches(rows=5, micro=1, seed=0, widths=WIDTHS):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((rows, widths[0])), rng.integers(0, widths[-1], rows)) for _ in range(micro)]


def loss(layout, w, data, scale, step, keep, seed=3):
    """The objective local_gradient differentiates: scale x (sum of the rows' losses)."""
    net = Network(layout, HostOps(np.float64), data[0][0].shape[0], keep, seed)
    total = 0.0
    for micro, (x, y) in enumerate(data):
        net.loss_sum[...] = 0
        net.x[...], net.y[...] = x, y
        net.forward(w, np.array([0, step]), micro, scale)
        total += net.loss_sum.sum()
    return scale * total


@pytest.mark.parametrize("inputs_first", [False, True])
@pytest.mark.parametrize("keep,micro", [(1.0, 1), (0.7, 1), (1.0, 3), (0.6, 2)])
def test_every_layer_gradient_matches_finite_differences(keep, micro, inputs_first):
    layout = Layout(WIDTHS, inputs_first)
    w = layout.initial(1, np.float64)
    data = batches(micro=micro)
    scale, step = 1 / 7, 4
    g, _, _ = local_gradient(layout, HostOps(np.float64), w, data, scale, step, keep, seed=3)
    rng = np.random.default_rng(2)
    for s in layout.segments:
        # every bias and 12 weights of every layer
        picks = list(range(s.weight_stop, s.stop)) + list(rng.integers(s.start, s.weight_stop, 12))
        for i in picks:
            h = 1e-6
            up, down = w.copy(), w.copy()
            up[i] += h
            down[i] -= h
            numeric = (loss(layout, up, data, scale, step, keep) - loss(layout, down, data, scale, step, keep)) / (
                2 * h
            )
            assert g[i] == pytest.approx(numeric, rel=1e-5, abs=1e-9), (s.layer, i)
    padding = np.ones(layout.size, bool)
    for s in layout.segments:
        padding[s.start : s.stop] = False
    assert not g[padding].any()  # padding never gets a gradient


@pytest.mark.parametrize("keep", [1.0, 0.7])
def test_both_backward_orders_compute_the_same_gradient_and_report_layers_in_their_order(keep):
    """params.backward_order: inputs_first runs the same GEMMs as layers, in another order: the same gradient to
    the bit (into a poisoned buffer), with layer_done called layer 0 first (and the buffer filled front to back)."""
    data = batches(rows=6, micro=2, widths=(9, 8, 6, 5, 4))
    grads, calls = {}, {}
    for inputs_first in (False, True):
        layout = Layout((9, 8, 6, 5, 4), inputs_first)
        w = layout.initial(1, np.float64)
        net = Network(layout, HostOps(np.float64), 6, keep, seed=3)
        g = np.full(layout.size, np.nan)
        g[[i for i in range(layout.size) if not any(s.start <= i < s.stop for s in layout.segments)]] = 0
        done = []
        for micro, (x, y) in enumerate(data):
            net.x[...], net.y[...] = x, y
            net.forward(w, np.array([0, 2]), micro, 0.1)
            net.backward(w, g, accumulate=micro > 0, layer_done=lambda layer, part: done.append(layer))
        grads[inputs_first] = [np.concatenate([layout.weight(g, i).ravel(), layout.bias(g, i)]) for i in range(4)]
        calls[inputs_first] = done[-4:]
        starts = [layout.segments[i].start for i in done[-4:]]
        assert starts == sorted(starts)  # the order backward finishes layers is the buffer's
    assert calls == {False: [3, 2, 1, 0], True: [0, 1, 2, 3]}
    for a, b in zip(grads[False], grads[True]):
        assert np.isfinite(a).all()
        np.testing.assert_array_equal(a, b)


def test_dropout_masks_are_deterministic_keep_their_share_and_differ_by_step_and_layer():
    a = keep_mask((64, 100), 0.8, seed=1, step=5, salt=3)
    np.testing.assert_array_equal(a, keep_mask((64, 100), 0.8, seed=1, step=5, salt=3))
    assert 0.77 < a.mean() < 0.83
    assert (a != keep_mask((64, 100), 0.8, seed=1, step=6, salt=3)).mean() > 0.2
    assert (a != keep_mask((64, 100), 0.8, seed=1, step=5, salt=4)).mean() > 0.2


def test_presets_have_the_documented_parameter_counts_and_aligned_segments():
    assert Layout(PRESETS["medium"]).parameters == 258_122
    assert Layout(PRESETS["large"]).parameters == 6_899_466
    layout = Layout(PRESETS["large"])
    starts = [s.start for s in layout.segments]
    assert all(s % ALIGN == 0 for s in starts)
    assert starts == sorted(starts, reverse=True)  # last layer first: backward fills the buffer in order
    w = np.arange(layout.size, dtype=np.float64)
    assert layout.weight(w, 2).shape == (512, 1024) and layout.weight(w, 2).base is w  # views, not copies
    assert layout.bias(w, 5)[0] == layout.segments[5].weight_stop


ODD = (9, 7, 5, 3, 4)  # fan-ins whose rows are not whole 16 bytes in bfloat16, float32 or float64


@pytest.mark.parametrize("itemsize", [2, 4, 8])
def test_padded_rows_start_on_16_bytes_and_hold_the_same_model(itemsize):
    """A layout for operands of ``itemsize`` bytes spaces each W row to 16 bytes (844 bfloat16 values: 848 apart)
    and holds the same parameters as rows back to back: the same count, draw and real values; padding zero."""
    assert Layout(PRESETS["large"], operand_itemsize=2).segments[0].pitch == 4816
    assert Layout(PRESETS["medium"], operand_itemsize=2).segments[0].pitch == 848
    assert Layout(PRESETS["medium"], operand_itemsize=4).segments[0].pitch == 844  # whole 16 bytes already
    packed, padded = Layout(ODD), Layout(ODD, operand_itemsize=itemsize)
    assert padded.parameters == packed.parameters and all(s.pitch > s.fan_in for s in padded.segments)
    w = padded.initial(3, np.float64)
    for s in padded.segments:
        assert s.pitch >= s.fan_in and s.pitch * itemsize % 16 == 0 and s.pitch - s.fan_in < 16 // itemsize
        view = padded.weight(w, s.layer)
        assert view.shape == (s.fan_out, s.fan_in) and view.base is w  # a view, written in place
        assert view.strides == (s.pitch * 8, 8) and view.ctypes.data == w.ctypes.data + s.start * 8
        assert all((s.start + r * s.pitch) * itemsize % 16 == 0 for r in range(s.fan_out))  # every row's start
    np.testing.assert_array_equal(np.concatenate(padded.real(w)), np.concatenate(packed.real(packed.initial(3, "f8"))))
    assert np.count_nonzero(w) == padded.parameters  # every real value drawn, the padding zero


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_padded_rows_train_like_packed_rows_and_their_padding_stays_zero(optimizer):
    """Gradient and update with W rows padded (as bf16 lays them out) against rows back to back: the same real
    values; the gradient writes no padding (poisoned gradient buffer: the padding stays as it was), and two
    optimizer steps leave the parameters' padding zero."""
    from spmd.workloads.train.params import TrainParams
    from spmd.workloads.train.trainer import Optimizer

    data = batches(rows=6, micro=2, widths=ODD)
    params = TrainParams(model=list(ODD), optimizer=optimizer, lr=0.05)
    results = {}
    for layout in (Layout(ODD), Layout(ODD, operand_itemsize=2)):
        ops, w = HostOps(np.float64), layout.initial(1, np.float64)
        real = np.zeros(layout.size, bool)
        for part in layout.real(np.arange(layout.size)):
            real[part] = True
        optimizer_ = Optimizer(params, ops, layout.size)
        counters = np.zeros(2, np.int64)
        for _ in range(2):
            net = Network(layout, ops, 6, 0.8, seed=3)
            g = np.where(real, np.nan, 0.0)  # backward writes every real element, no padding
            for micro, (x, y) in enumerate(data):
                net.x[...], net.y[...] = x, y
                net.forward(w, counters, micro, 1 / 12)
                net.backward(w, g, accumulate=micro > 0)
            assert np.isfinite(g).all() and not g[~real].any()
            optimizer_.step(w, g, counters)
            counters += 1
        assert not w[~real].any()
        results[layout.segments[0].pitch] = (np.concatenate(layout.real(w)), np.concatenate(layout.real(g)))
    (w_packed, g_packed), (w_padded, g_padded) = results[9], results[16]
    np.testing.assert_allclose(g_padded, g_packed, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(w_padded, w_packed, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("inputs_first", [False, True])
def test_backward_says_when_a_layers_parameters_are_free_to_update(inputs_first):
    """params_done(layer) comes once backward no longer reads the layer's W nor writes its gradient: poisoning the
    layer's parameters and freezing its gradient there (as an update beside the rest of backward would change
    them) leaves the gradient the same, and every layer is named once."""
    layout = Layout(ODD, inputs_first)
    data = batches(rows=6, micro=1, widths=ODD)[0]
    want, _, _ = local_gradient(layout, HostOps(np.float64), layout.initial(1, np.float64), [data], 0.1, 2)
    w, g = layout.initial(1, np.float64), np.zeros(layout.size)
    net = Network(layout, HostOps(np.float64), 6)
    net.x[...], net.y[...] = data
    net.forward(w, np.array([0, 2]), 0, 0.1)
    freed, frozen = [], {}

    def done(layer):
        freed.append(layer)
        lo, hi = layout.span(layer)
        frozen[layer] = g[lo:hi].copy()
        w[lo:hi] = np.nan  # read again after this: NaN in the gradient

    net.backward(w, g, accumulate=False, params_done=done)
    assert freed == (list(range(layout.layers)) if inputs_first else list(reversed(range(layout.layers))))
    np.testing.assert_array_equal(g, want)
    for layer, before in frozen.items():  # nothing wrote the layer's gradient after it was freed
        lo, hi = layout.span(layer)
        np.testing.assert_array_equal(g[lo:hi], before)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("inputs_first", [False, True])
def test_updating_each_layer_inside_backward_trains_to_the_same_weights(tmp_path, optimizer, inputs_first):
    """params.update_in_backward on one rank: each layer updated as soon as backward is done with it gives the
    parameters one update after backward gives, to the bit (elementwise, same arithmetic), over 3 steps with
    2 micro-batches; the report says it was used."""
    from mpi4py import MPI

    from spmd.core.runtime import Context
    from spmd.io.generate import generate
    from spmd.job import run_job
    from spmd.workloads.train.workload import TrainWorkload

    def config(on):
        return job_config_from_dict(
            {
                "workload": "train",
                "device": "cpu",
                "comm": "mpi",
                "warmup": 1,
                "repeats": 1,
                "input": {"path": str(tmp_path / "t.h5")},
                "generate": {"shape": [400, ODD[0]], "seed": 4, "loc": 0.0, "scale": 1.0},
                "output": str(tmp_path / f"out-{on}"),
                "params": {
                    "model": list(ODD),
                    "batch": 8,
                    "accumulate": 2,
                    "steps": 3,
                    "optimizer": optimizer,
                    "lr": 0.05,
                    "eval": None,
                    "backward_order": "inputs_first" if inputs_first else "layers",
                    "update_in_backward": on,
                },
            }
        )

    generate(config(False), TrainWorkload)
    runs = {}
    for on in (False, True):
        ctx = Context(MPI.COMM_SELF)
        job = run_job(ctx, config(on), after_run=lambda _, workload: workload.trainer.host_state()[0])
        ctx.close()
        runs[on] = job
        assert job.report["result"]["update_in_backward"] is on and job.report["verified"]
    np.testing.assert_array_equal(runs[True].extra, runs[False].extra)
    assert np.abs(runs[True].extra - Layout(ODD, inputs_first, 4).initial(0, "float32")).max() > 1e-3  # it trained


def test_a_checkpoint_holds_the_real_parameters_whatever_the_rows_padding(tmp_path):
    """A checkpoint of a padded layout (precision bf16) loads into a packed one (float32) and back: the file
    holds the real parameters only."""
    padded, packed = Layout(ODD, operand_itemsize=2), Layout(ODD)
    meta = {**META, "widths": list(ODD)}
    w = padded.initial(4, np.float64)
    path = str(tmp_path / "c.h5")
    save_checkpoint(path, padded, w, {"m": w * 2, "v": w * 3}, 7, meta)
    w2, state, _, _ = load_checkpoint(path, packed, meta, ("m", "v"))
    np.testing.assert_array_equal(w2, packed.initial(4, np.float64))
    np.testing.assert_array_equal(np.concatenate(packed.real(state["v"])), np.concatenate(padded.real(w * 3)))
    save_checkpoint(str(tmp_path / "d.h5"), packed, w2, state, 7, meta)
    w3, _, _, _ = load_checkpoint(str(tmp_path / "d.h5"), padded, meta, ("m", "v"))
    np.testing.assert_array_equal(w3, w)  # padding zero again


def test_sgd_and_adam_follow_their_formulas():
    ops = HostOps(np.float64)
    rng = np.random.default_rng(0)
    w0, grads = rng.standard_normal(10), [rng.standard_normal(10) for _ in range(3)]
    w, v = w0.copy(), np.zeros(10)
    want, buf = w0.copy(), None
    for t, g in enumerate(grads):
        ops.sgd(w, g, v, 0.1, 0.9, np.array([0, t]))
        buf = g.copy() if buf is None else 0.9 * buf + g  # PyTorch: the first step's buffer is g
        want = want - 0.1 * buf
    np.testing.assert_allclose(w, want, rtol=1e-14)
    w, m, v = w0.copy(), np.zeros(10), np.zeros(10)
    want, mm, vv = w0.copy(), np.zeros(10), np.zeros(10)
    for t, g in enumerate(grads, start=1):
        ops.adam(w, g, m, v, 0.01, 0.9, 0.99, 1e-8, np.array([0, t - 1]))
        mm, vv = 0.9 * mm + 0.1 * g, 0.99 * vv + 0.01 * g * g
        want = want - 0.01 * (mm / (1 - 0.9**t)) / (np.sqrt(vv / (1 - 0.99**t)) + 1e-8)
    np.testing.assert_allclose(w, want, rtol=1e-13)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 20000), min_size=1, max_size=4),
    optimizer=st.sampled_from(["sgd", "adam"]),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_the_host_optimizers_reuse_their_scratch_and_follow_their_formulas(sizes, optimizer, dtype, seed):
    """Buckets of any sizes in any order, one HostOps: each update equals its formula in float64 (to the dtype's
    rounding), and once the scratch has grown to a bucket no update allocates an array of the bucket's size (fresh
    arrays a step were faulted in again every step on a rank whose malloc had seen no larger block)."""
    ops, rng = HostOps(dtype), np.random.default_rng(seed)
    for i, n in enumerate(sizes + sizes):
        grown = i >= len(sizes)  # the second pass finds the scratch grown to every size
        w, g = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
        m, v = rng.standard_normal(n).astype(dtype), np.abs(rng.standard_normal(n)).astype(dtype)
        w64, g64, m64, v64 = (x.astype(np.float64) for x in (w, g, m, v))
        counters = np.array([0, 2])
        tracemalloc.start()
        if optimizer == "sgd":
            ops.sgd(w, g, m, 0.1, 0.9, counters)
        else:
            ops.adam(w, g, m, v, 0.01, 0.9, 0.99, 1e-8, counters)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if optimizer == "sgd":
            want = w64 - 0.1 * (0.9 * m64 + g64)
        else:
            mm, vv = 0.9 * m64 + 0.1 * g64, 0.99 * v64 + 0.01 * g64 * g64
            want = w64 - 0.01 * (mm / (1 - 0.9**3)) / (np.sqrt(vv / (1 - 0.99**3)) + 1e-8)
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(w, want, rtol=tol, atol=tol)
        if grown and w.nbytes >= 1 << 14:  # below it, a few KiB of the interpreter's own blur the count
            assert peak < w.nbytes / 2, (n, peak)


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(1, 300),
    k=st.integers(1, 200),
    n=st.integers(1, 300),
    trans_a=st.booleans(),
    trans_b=st.booleans(),
    beta=st.sampled_from([0.0, 1.0, 0.5]),
)
def test_the_host_gemm_writes_its_product_in_place(m, k, n, trans_a, trans_b, beta):
    """out = op(a) @ op(b) + beta * out against float64, and from the second call on no array of out's size is
    allocated (the product of an accumulating GEMM goes to the kept scratch)."""
    ops, rng = HostOps(np.float64), np.random.default_rng(m * 7 + n)
    a = rng.standard_normal((k, m) if trans_a else (m, k))
    b = rng.standard_normal((n, k) if trans_b else (k, n))
    for call in range(2):
        out = rng.standard_normal((m, n))
        want = (a.T if trans_a else a) @ (b.T if trans_b else b) + beta * out
        tracemalloc.start()
        ops.gemm(a, b, out, trans_a, trans_b, beta)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
        if call and out.nbytes >= 1 << 16:  # below it, NumPy's and the interpreter's own few KiB blur the count
            assert peak < out.nbytes / 2, (out.shape, peak)


@pytest.mark.parametrize("inputs_first", [False, True])
@pytest.mark.parametrize(
    "widths,cap_bytes",
    [
        (PRESETS["large"], 25 << 20),
        (PRESETS["large"], 1 << 20),
        (PRESETS["medium"], 25 << 20),
        (PRESETS["medium"], 4096),
        ((10, 300, 3), 1000),
    ],
)
def test_buckets_cover_every_parameter_once_within_the_cap(widths, cap_bytes, inputs_first):
    layout = Layout(widths, inputs_first)
    buckets = plan_buckets(layout, cap_bytes, 4)
    assert buckets[0].start == 0 and buckets[-1].stop == layout.size
    assert all(a.stop == b.start for a, b in zip(buckets, buckets[1:]))  # contiguous, disjoint
    assert all(0 < b.size * 4 <= max(cap_bytes, ALIGN * 4) for b in buckets)
    for b in buckets:  # ready once the last layer backward computes of those it touches has its gradient
        touched = [s.layer for s in layout.segments if s.start < b.stop and b.start < s.stop]
        assert b.ready_after == (max(touched) if inputs_first else min(touched))


def test_large_model_default_buckets():
    """25 MiB: layers 5..1 (7.9 MB) fit one bucket; layer 0 (19.7 MB) gets its own."""
    layout = Layout(PRESETS["large"])
    buckets = plan_buckets(layout, 25 << 20, 4)
    assert [b.ready_after for b in buckets] == [1, 0]
    assert buckets[1].start == layout.segments[0].start
    small = plan_buckets(layout, 1 << 20, 4)  # smaller than a layer: layer 0 is cut in pieces
    assert sum(b.ready_after == 0 for b in small) == -(-(layout.size - layout.segments[0].start) // (1 << 18))


def test_large_model_buckets_with_inputs_first():
    """backward_order: inputs_first puts layer 0 first in the buffer; at 20 MiB its 19.7 MB are one bucket, ready
    after layer 0 (the first weight gradient computed), and layers 1..5 (7.9 MB) the other, ready after layer 5."""
    layout = Layout(PRESETS["large"], inputs_first=True)
    assert layout.segments[0].start == 0
    buckets = plan_buckets(layout, 20 << 20, 4)
    assert [b.ready_after for b in buckets] == [0, 5]
    assert buckets[0].stop == layout.segments[1].start
    assert [b.ready_after for b in plan_buckets(layout, 25 << 20, 4)] == [2, 5]  # 25 MiB takes layers 0..2


@pytest.mark.parametrize("operand_itemsize", [None, 2])
@pytest.mark.parametrize("cap_mb", [10, 6, 1])
def test_split_buckets_cut_the_first_layer_at_aligned_whole_rows(cap_mb, operand_itemsize):
    """params.split_gradients: layer 0 of `large` (1024 rows of 4812, 4816 apart in bf16's layout) cut at whole
    rows, a multiple of 16 rows (4 when 4816 apart: each cut on a 64-element boundary), each piece within the cap,
    the last with the biases; its row blocks match, and each piece is ready after its own block."""
    from spmd.workloads.train.buckets import row_blocks

    layout = Layout(PRESETS["large"], operand_itemsize=operand_itemsize)
    seg = layout.segments[0]
    assert seg.pitch == (4816 if operand_itemsize else 4812)
    step = 4 if operand_itemsize else 16  # rows from one 64-element boundary to the next
    buckets = plan_buckets(layout, cap_mb << 20, 4, split=True)
    assert buckets[0].start == 0 and buckets[-1].stop == layout.size
    assert all(a.stop == b.start for a, b in zip(buckets, buckets[1:]))
    pieces = [b for b in buckets if b.ready_after == 0]
    assert [b.part for b in pieces] == list(range(len(pieces))) and len(pieces) == -(
        -seg.fan_out // ((cap_mb << 20) // 4 // seg.pitch // step * step)
    )
    assert all(b.size * 4 <= cap_mb << 20 for b in pieces[:-1]) and pieces[-1].stop == layout.size
    assert all((b.start - seg.start) % seg.pitch == 0 and b.start % 64 == 0 for b in pieces)
    blocks = row_blocks(layout, buckets)[0]
    assert blocks[0][0] == 0 and blocks[-1][1] == seg.fan_out and len(blocks) == len(pieces)
    assert [seg.start + r0 * seg.pitch for r0, _ in blocks] == [b.start for b in pieces]
    assert plan_buckets(layout, 25 << 20, 4, split=True) == plan_buckets(layout, 25 << 20, 4)  # it fits: whole
    assert row_blocks(layout, plan_buckets(layout, 25 << 20, 4, split=True)) == {}


def test_gemm_operands_may_be_blocks_of_columns_never_transposed_views():
    """The GPU ops read a GEMM operand's leading dimension from its strides: a block of dZ's columns (row blocks
    of dW) keeps the full row's stride; a transposed view is refused instead of read wrongly."""
    from spmd.workloads.train.ops import _leading

    delta = np.zeros((512, 1024), np.float32)
    assert _leading(delta) == 1024 and _leading(delta[:, 544:1024]) == 1024 and _leading(delta[:, :16]) == 1024
    assert _leading(np.ones(300, np.float32).reshape(1, -1)) == 300
    with pytest.raises(ValueError, match="rows must be contiguous"):
        _leading(delta.T)


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_the_samples_of_a_step_do_not_depend_on_the_rank_count(ranks):
    rows, shards, g = 1000, 6, 24

    def global_rows(n):
        steps = []
        for r in range(n):
            s = Sampler(rows, shards, n, r, g, seed=9)
            steps.append(s.window(37, 5) + s.local_rows[0])
        return np.sort(np.concatenate(steps, axis=1), axis=1)

    np.testing.assert_array_equal(global_rows(ranks), global_rows(1))


def test_each_epoch_visits_every_row_of_a_shard_once_and_epochs_differ():
    s = Sampler(40, 2, 1, 0, global_batch=4, seed=1)  # shards of 20 rows, 2 samples each per step
    one_epoch = s.window(0, 10)
    for k in range(2):
        assert sorted(one_epoch[:, 2 * k : 2 * k + 2].ravel()) == list(range(20 * k, 20 * k + 20))
    assert not np.array_equal(one_epoch, s.window(10, 10))


def test_sampler_refuses_impossible_splits():
    with pytest.raises(ConfigError, match="multiple of 2"):
        Sampler(100, 3, 2, 0, 12, 0)
    with pytest.raises(ConfigError, match="divisor of 10"):
        Sampler(100, 4, 2, 0, 10, 0)
    with pytest.raises(InputError, match="3 rows cannot make 4 data shards"):
        Sampler(3, 4, 2, 0, 8, 0)


META = {"widths": [7, 6, 5, 4], "dtype": "float64", "optimizer": "adam", "global_batch": 8, "data_shards": 2, "seed": 0}


def test_checkpoint_round_trip_and_mismatch(tmp_path):
    layout = Layout(WIDTHS)
    w = layout.initial(4, np.float64)
    state = {"m": w * 2, "v": w * 3}
    path = str(tmp_path / "c.h5")
    save_checkpoint(path, layout, w, state, 120, META)
    w2, s2, step, failed = load_checkpoint(path, layout, META, ("m", "v"))
    np.testing.assert_array_equal(w2, w)
    np.testing.assert_array_equal(s2["v"], state["v"])
    assert step == 120 and failed is None
    with pytest.raises(ConfigError, match="global_batch = 8, this run has 16"):
        load_checkpoint(path, layout, {**META, "global_batch": 16}, ("m", "v"))
    (tmp_path / "junk.h5").write_bytes(b"not hdf5")
    with pytest.raises(InputError, match="not an HDF5 file"):
        load_checkpoint(str(tmp_path / "junk.h5"), layout, META, ("m",))


def test_a_failed_checkpoint_write_leaves_the_previous_one(tmp_path, monkeypatch):
    layout = Layout(WIDTHS)
    w = layout.initial(4, np.float64)
    path = str(tmp_path / "c.h5")
    save_checkpoint(path, layout, w, {"momentum": w}, 10, META)

    class Exploding(dict):
        def items(self):
            raise OSError("disk full")

    with pytest.raises(InputError, match="disk full"):
        save_checkpoint(path, layout, w * 0, Exploding(), 20, META)
    _, _, step, _ = load_checkpoint(path, layout, META, ("momentum",))
    assert step == 10 and not (tmp_path / "c.h5.tmp").exists()


def config(**params):
    return job_config_from_dict({"workload": "train", "input": {"path": "x.h5"}, "params": params})


@pytest.mark.parametrize(
    "params,message",
    [
        ({"model": "huge"}, "unknown preset 'huge'"),
        ({"model": [10]}, "at least 2 positive widths"),
        ({"model": [10, 1]}, "number of classes"),
        ({"batch": 0}, "params.batch: must be >= 1"),
        ({"dropout": 1.0}, "params.dropout"),
        ({"betas": [0.9]}, "params.betas"),
        ({"tf32": True, "dtype": "float64"}, "params.tf32: applies to float32 only"),
        ({"precision": "bf16", "dtype": "float64"}, "params.precision: applies to float32 only"),
        ({"precision": "fp8"}, "params.precision"),
        ({"tf32": True, "precision": "bf16"}, "params.tf32: true and params.precision: bf16 disagree"),
        ({"checkpoint": {"path": "c.h5", "every": 30}, "steps": 20}, "not a multiple of params.steps"),
        ({"target_accuracy": 0.9, "eval": None}, "needs the held-out set"),
        ({"graph": "sometimes"}, "params.graph"),
        ({"bucket_mb": 0}, "params.bucket_mb"),
        ({"optimiser": "sgd"}, "unknown key params.optimiser"),
    ],
)
def test_config_errors_name_the_key(params, message):
    with pytest.raises(ConfigError, match=message):
        config(**params)


def test_strong_scaling_divides_the_per_rank_batch():
    from fractions import Fraction

    from spmd.workloads.train.workload import TrainWorkload

    cfg = config(batch=64)
    assert TrainWorkload.strong_config(cfg, Fraction(2)).params.batch == 32
    assert TrainWorkload.weak_config(cfg, Fraction(2)) is cfg
    with pytest.raises(ConfigError, match="cannot be split over 3x"):
        TrainWorkload.strong_config(cfg, Fraction(3))


def test_host_fused_primitives_equal_their_parts():
    """linear_relu and weight_gradient (what the GPU fuses into cuBLASLt epilogues) against the plain steps."""
    ops = HostOps(np.float64)
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((9, 7)), rng.standard_normal((5, 7)), rng.standard_normal(5)
    out = np.full((9, 5), np.nan)
    ops.linear_relu(x, w, b, out)
    np.testing.assert_allclose(out, np.maximum(x @ w.T + b, 0), rtol=1e-14)
    assert (out == 0).any() and (out > 0).any()  # both sides of the ReLU exercised
    delta = rng.standard_normal((9, 5))
    dw, db = np.full((5, 7), np.nan), np.full(5, np.nan)
    ops.weight_gradient(delta, x, dw, db, accumulate=False)
    np.testing.assert_allclose(dw, delta.T @ x, rtol=1e-14)
    np.testing.assert_allclose(db, delta.sum(axis=0), rtol=1e-14)
    ops.weight_gradient(delta, x, dw, db, accumulate=True)
    np.testing.assert_allclose(dw, 2 * delta.T @ x, rtol=1e-14)
    np.testing.assert_allclose(db, 2 * delta.sum(axis=0), rtol=1e-14)


def test_bfloat16_rounding_is_to_the_nearest_even():
    """bf16_bits (the host twin of kernels.cu's bf16) against the two neighbouring bfloat16 values, chosen by
    float64 distance, ties to the even pattern; NaN stays NaN, infinities and signed zeros stay."""
    from spmd.workloads.train.ops import bf16_bits, bf16_values

    rng = np.random.default_rng(5)
    x = np.concatenate(
        [
            rng.standard_normal(20000).astype(np.float32) * np.float32(10.0) ** rng.integers(-30, 30, 20000),
            np.float32([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 3.0e38, 1e-40]),
        ]
    ).astype(np.float32)
    bits = bf16_bits(x)
    low = (x.view(np.uint32) >> 16).astype(np.uint16)  # truncation: one neighbour, same sign
    high = low + np.uint16(1)  # the next pattern away from zero
    dl = np.abs(bf16_values(low).astype(np.float64) - x)
    dh = np.abs(bf16_values(high).astype(np.float64) - x)
    want = np.where(dl < dh, low, np.where(dh < dl, high, np.where(low % 2 == 0, low, high)))
    np.testing.assert_array_equal(bits, want)
    special = bf16_bits(np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0]))
    assert np.isnan(bf16_values(special[:1]))[0]
    assert bf16_values(special[1:]).tolist() == [np.inf, -np.inf, 0.0, -0.0]
    assert np.signbit(bf16_values(special[4:]))[0]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_updating_the_buckets_one_by_one_equals_one_update(optimizer):
    """params.update_per_bucket updates each bucket's slice of the flat buffers on its own: the same parameters
    and optimizer state as one update of everything (a slice left out or updated twice would differ)."""
    from spmd.workloads.train.params import TrainParams
    from spmd.workloads.train.trainer import Optimizer

    ops, rng = HostOps(np.float64), np.random.default_rng(5)
    params = TrainParams(model="medium", optimizer=optimizer, lr=0.01)
    layout = Layout(params.widths)
    buckets = plan_buckets(layout, 64 * 1024, 8)
    assert len(buckets) > 3
    w0, counters = layout.initial(0, "float64"), np.zeros(2, np.int64)
    whole, parts = Optimizer(params, ops, layout.size), Optimizer(params, ops, layout.size)
    w_whole, w_parts = w0.copy(), w0.copy()
    for _ in range(3):
        g = rng.standard_normal(layout.size)
        whole.step(w_whole, g, counters)
        for b in buckets:
            parts.step(w_parts, g, counters, b.start, b.stop)
        counters += 1
    np.testing.assert_array_equal(w_parts, w_whole)
    for name in whole.state:
        np.testing.assert_array_equal(parts.state[name], whole.state[name])
    assert np.abs(w_whole - w0).max() > 0


def test_a_checkpoint_of_a_failed_verification_is_not_resumed_without_saying_so(tmp_path):
    """A run that ends in exit 3 marks the checkpoints it wrote: resuming refuses them (exit 2) unless
    params.resume_unverified, which returns the reason (the report then carries it as a warning)."""
    layout = Layout(WIDTHS)
    w = layout.initial(4, np.float64)
    path = str(tmp_path / "c.h5")
    save_checkpoint(path, layout, w, {"m": w}, 40, META)
    mark_failed(path, "rank 1 on vm: parameters differ from rank 0's")
    with pytest.raises(ConfigError, match="written by a run whose verification failed .*resume_unverified: true"):
        load_checkpoint(path, layout, META, ("m",))
    w2, _, step, failed = load_checkpoint(path, layout, META, ("m",), unverified=True)
    np.testing.assert_array_equal(w2, w)
    assert step == 40 and failed == "rank 1 on vm: parameters differ from rank 0's"

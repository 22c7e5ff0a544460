"""Where one spmd training step spends its time on the GPU: each primitive of the step (gather, every GEMM,
the fused kernels, the optimizer) timed alone, as ``--reps`` copies of it captured in one CUDA graph and
replayed (the way the step itself runs), at each batch given. One JSON line per (model, batch, op).

    python -m bench.tools.train_ops [--models medium,large] [--batches 16,32] > train-ops.jsonl
"""

from bench.usage import answer_help

answer_help(
    __doc__, "python -m bench.tools.train_ops [--models medium,large] [--batches 16,32] (a GPU, CuPy)"
)  # before the libraries a machine may lack

import argparse
import json
import sys

import cupy
import numpy as np

from spmd.workloads.train.layout import Layout, model_widths
from spmd.workloads.train.network import Network
from spmd.workloads.train.ops import make_ops


def graph_time(fn, reps: int, stream, ops) -> float:
    """Microseconds per call of ``fn`` replayed ``reps`` times in one graph (median of 5 replays)."""
    ops.bind(stream)
    with stream:
        fn()  # kernels loaded before the capture
        stream.begin_capture(cupy.cuda.runtime.streamCaptureModeRelaxed)
        for _ in range(reps):
            fn()
        graph = stream.end_capture()
        graph.launch(stream)
        times = []
        for _ in range(5):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            graph.launch(stream)
            stop.record(stream)
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e3 / reps)
    return float(np.median(times))


def step_ops(layout, ops, net, w, g, counters, xs, ys, idx, batch, master=None):
    """(name, callable) for every primitive of one SGD step, in step order. ``w``: the parameters the GEMMs
    read; ``master``: the float32 ones the optimizer updates, when they differ (precision bf16)."""
    last = layout.layers - 1
    master = w if master is None else master
    out = [] if master is w else [("to_bf16", lambda: ops.to_storage(master, w))]
    out.append(("gather", lambda: ops.gather(xs, ys, idx, counters, batch, 0, net.x, net.y)))
    inp = net.x
    for layer in range(layout.layers):
        s = layout.segments[layer]
        shape = f"{batch}x{s.fan_in}x{s.fan_out}"
        if layer < last:  # what Network.forward runs without dropout
            out.append(
                (
                    f"fwd linear_relu L{layer} {shape}",
                    lambda i=inp, layer=layer: ops.linear_relu(
                        i, layout.weight(w, layer), layout.bias(w, layer), net.acts[layer]
                    ),
                )
            )
        else:
            out.append(
                (
                    f"fwd gemm L{layer} {shape}",
                    lambda i=inp, layer=layer: ops.gemm(i, layout.weight(w, layer), net.acts[layer], trans_b=True),
                )
            )
        inp = net.acts[layer]
    out.append(
        (
            "softmax_xent",
            lambda: ops.softmax_xent(
                net.acts[last], layout.bias(w, last), net.y, 1.0, net.dlogits, net.loss_sum, net.correct
            ),
        )
    )
    delta = net.dlogits
    for layer in reversed(range(layout.layers)):
        inp = net.x if layer == 0 else net.acts[layer - 1]
        out.append(
            (
                f"dW+db L{layer}",
                lambda d=delta, i=inp, layer=layer: ops.weight_gradient(
                    d, i, layout.weight(g, layer), layout.bias(g, layer), False
                ),
            )
        )
        if layer > 0:
            below = net.deltas[layer - 1]
            out.append(
                (f"dX gemm L{layer}", lambda d=delta, b=below, layer=layer: ops.gemm(d, layout.weight(w, layer), b))
            )
            out.append((f"act_back L{layer - 1}", lambda b=below, a=net.acts[layer - 1]: ops.act_backward(b, a, 1.0)))
            delta = below
    momentum = g.copy()
    out.append(("sgd", lambda: ops.sgd(master, g, momentum, 0.01, 0.9, counters)))
    return out


def build_step(model: str, batch: int, precision, rng):
    """(ops, [(name, callable)]) for one SGD step of ``model`` at ``batch`` on the GPU, data and parameters
    resident; ``precision`` as params.precision (bf16: the GEMMs read a bfloat16 copy of the parameters)."""
    layout = Layout(model_widths(model))
    ops = make_ops("gpu", np.float32, precision, max_rows=batch)
    net = Network(layout, ops, batch)
    master = cupy.asarray(layout.initial(0, np.float32))
    w = master if ops.storage == ops.dtype else cupy.zeros(layout.size, ops.storage)
    g = cupy.zeros(layout.size, np.float32)
    xs = ops.stage(rng.standard_normal((4096, layout.widths[0]), dtype=np.float32))
    ys = cupy.asarray(rng.integers(0, layout.widths[-1], 4096).astype(np.int32))
    idx = cupy.asarray(rng.integers(0, 4096, 64 * batch).astype(np.int32))
    counters = cupy.zeros(2, np.int64)
    cupy.cuda.Device().synchronize()  # the copies above ran on the legacy stream; the ops run on another
    return ops, step_ops(layout, ops, net, w, g, counters, xs, ys, idx, batch, master)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="medium,large")
    parser.add_argument("--batches", default="8,16,32,64")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--precision", choices=("tf32", "bf16"), default=None, help="the GEMMs' (default: float32)")
    args = parser.parse_args()
    stream = cupy.cuda.Stream(non_blocking=True)
    rng = np.random.default_rng(0)
    for model in args.models.split(","):
        for batch in map(int, args.batches.split(",")):
            ops, named = build_step(model, batch, args.precision, rng)
            total = 0.0
            for name, fn in named:
                print(model, batch, name, file=sys.stderr, flush=True)  # where a failure happened
                us = graph_time(fn, args.reps, stream, ops)
                total += us
                print(json.dumps({"model": model, "batch": batch, "op": name, "us": round(us, 3)}), flush=True)

            def whole():
                for _, fn in named:
                    fn()

            step_us = graph_time(whole, 20, stream, ops)
            print(
                json.dumps(
                    {
                        "model": model,
                        "batch": batch,
                        "op": "SUM of ops",
                        "us": round(total, 3),
                        "whole_step_us": round(step_us, 3),
                        "samples_per_s": round(batch / step_us * 1e6),
                    }
                ),
                flush=True,
            )
            lt = getattr(ops, "_lt", None)
            for key, plan in lt.plans.items() if lt else ():
                if plan is not None:  # (m, n, k, op_a, op_b, ...) column-major, as cuBLASLt sees it
                    print(
                        json.dumps(
                            {
                                "model": model,
                                "batch": batch,
                                "gemm": list(key[:5]),
                                "epilogue": plan.epilogue,
                                "candidates_us": [round(t, 2) for t in plan.timings],
                                "chosen_us": plan.tuned_us,
                            }
                        ),
                        flush=True,
                    )
            ops.close()


if __name__ == "__main__":
    main()

"""Where one GPU's training step spends its time under each params.backward_order: the step (forward, backward,
SGD) of ``model`` at ``batch`` captured in one CUDA graph per order, an event-record node after every primitive,
the graphs replayed alternately; per primitive the median over the replays. One JSON line per (order, primitive),
then one per order with the phase totals. Orders: layers, inputs_first, layers_flushed (L2 overwritten before every
weight gradient) and, with --persist, inputs_first_persist (the activations in train's persisting L2 window).

    python -m bench.tools.backward_order [--model large] [--batch 512] [--replays 40] > backward-order.jsonl
"""

from bench.usage import answer_help

answer_help(
    __doc__, "python -m bench.tools.backward_order [--model large] [--batch 512] [--replays 40] (a GPU, CuPy)"
)  # before the libraries a machine may lack

import argparse
import json
import sys

import cupy
import numpy as np

from spmd.workloads.train.l2 import L2Window
from spmd.workloads.train.layout import Layout, model_widths
from spmd.workloads.train.marks import CU_EVENT_RECORD_EXTERNAL, driver_record
from spmd.workloads.train.network import Network
from spmd.workloads.train.ops import make_ops

PRIMITIVES = ("gemm", "linear_relu", "weight_gradient", "act_backward", "softmax_xent", "sgd")


class TimedOps:
    """The ops, each primitive call followed by an event record (an event-record node inside a capture); with
    ``flush`` (a device buffer larger than L2), every weight gradient runs after the buffer is overwritten (an
    experiment: how much of a GEMM's time is its operands coming from L2)."""

    def __init__(self, ops, flush=None):
        self._ops, self._record, self._flush = ops, driver_record(), flush
        self.names, self.events = [], []

    def _mark(self, name: str) -> None:
        event = cupy.cuda.Event()
        status = self._record(event.ptr, cupy.cuda.get_current_stream().ptr, CU_EVENT_RECORD_EXTERNAL)
        assert status == 0, f"cuEventRecordWithFlags: CUresult {status}"
        self.names.append(f"{len(self.names):02d} {name}")
        self.events.append(event)

    def __getattr__(self, name):
        attr = getattr(self._ops, name)
        if name not in PRIMITIVES:
            return attr

        def call(*args, **kwargs):
            if self._flush is not None and name == "weight_gradient":
                self._flush.fill(0)
                self._mark("flush")
            out = attr(*args, **kwargs)
            self._mark(f"{name} " + "x".join(str(a.shape) for a in args[:2] if hasattr(a, "shape")))
            return out

        return call


def build(widths, batch: int, inputs_first: bool, stream, rng, flush=None, persist=False):
    """A captured step of one order: (graph, start event, TimedOps, index of the first backward primitive, the
    buffers the graph uses: they must outlive it)."""
    layout = Layout(widths, inputs_first)
    ops = make_ops("gpu", np.float32, None, max_rows=batch)
    net = Network(layout, ops, batch)
    window = L2Window(stream, net.arena.data.ptr, net.arena.nbytes) if persist else None  # what train does
    if window is not None:
        print(f"persist: {window.describe()}", file=sys.stderr)
    w = cupy.asarray(layout.initial(0, np.float32))
    g = cupy.zeros(layout.size, np.float32)
    momentum = cupy.zeros(layout.size, np.float32)
    counters = cupy.zeros(2, np.int64)
    net.x[...] = cupy.asarray(rng.standard_normal((batch, widths[0]), dtype=np.float32))
    net.y[...] = cupy.asarray(rng.integers(0, widths[-1], batch).astype(np.int32))
    cupy.cuda.Device().synchronize()

    def step():
        net.forward(w, counters, 0, 1.0 / batch)
        backward_from = len(timed.names)
        net.backward(w, g, accumulate=False)
        net.ops.sgd(w, g, momentum, 1e-6, 0.9, counters)
        return backward_from

    timed = TimedOps(ops, flush)
    with stream:
        step()  # GEMM algorithms tuned, kernels loaded (timed is not yet in place)
        net.ops = timed
        ops.bind(stream)
        start = cupy.cuda.Event()
        stream.begin_capture(cupy.cuda.runtime.streamCaptureModeRelaxed)
        timed._record(start.ptr, stream.ptr, CU_EVENT_RECORD_EXTERNAL)
        backward_from = step()
        graph = stream.end_capture()
    return graph, start, timed, backward_from, (ops, net, w, g, momentum, counters, window)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="large")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--replays", type=int, default=40)
    parser.add_argument(
        "--persist",
        action="store_true",
        help="also inputs_first with the activations and their gradients in a persisting L2 window (train's L2Window)",
    )
    args = parser.parse_args()
    widths = model_widths(args.model)
    stream = cupy.cuda.Stream(non_blocking=True)
    rng = np.random.default_rng(0)
    flush = cupy.zeros(128 << 20, np.uint8)  # 128 MiB: larger than any L2
    orders = {
        "layers": build(widths, args.batch, False, stream, rng),
        "inputs_first": build(widths, args.batch, True, stream, rng),
        "layers_flushed": build(widths, args.batch, False, stream, rng, flush=flush),
    }
    if args.persist:  # last: the window stays on the stream
        orders["inputs_first_persist"] = build(
            widths, args.batch, True, cupy.cuda.Stream(non_blocking=True), rng, persist=True
        )
    times = {name: [] for name in orders}
    for _ in range(args.replays):
        for name, (graph, start, timed, _, _) in orders.items():
            graph.launch(stream)
            stream.synchronize()
            marks = [cupy.cuda.get_elapsed_time(start, e) * 1e3 for e in timed.events]
            times[name].append(np.diff([0.0, *marks]))
    for name, (_, _, timed, backward_from, _) in orders.items():
        per_op = np.median(np.array(times[name]), axis=0)
        for op, us in zip(timed.names, per_op):
            print(json.dumps({"order": name, "op": op, "us": round(float(us), 2)}))
        per_op = np.where(["flush" in op for op in timed.names], 0.0, per_op)  # the flushes are not the step's
        print(
            json.dumps(
                {
                    "order": name,
                    "forward_us": round(float(per_op[:backward_from].sum()), 2),
                    "backward_us": round(float(per_op[backward_from:-1].sum()), 2),
                    "sgd_us": round(float(per_op[-1]), 2),
                    "step_us": round(float(per_op.sum()), 2),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()

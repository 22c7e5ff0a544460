"""Data-parallel training steps: k micro-batches, bucketed gradient allreduce, optimizer.

One step: for each micro-batch, gather its rows from the rank's shard (indices from the
sampler, read through a device-side cursor), forward, backward; on the last micro-batch each
bucket's allreduce starts as soon as backward has produced it; then the optimizer. On a GPU
everything runs on one compute stream (plus the exchange's communication stream), nothing
allocates, and per-step values live in device memory, so a step can be captured once in a
CUDA graph and replayed: one launch per step instead of dozens.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ...core import faults
from ...core import xp as xpmod
from ...core.errors import VerificationError
from .buckets import GradientExchange, plan_buckets, row_blocks
from .l2 import L2Window
from .marks import make_marks
from .network import Network
from .ops import CURSOR, STEP


class Optimizer:
    """SGD with momentum or Adam over the flat parameter buffer: one fused kernel per step.

    Attributes:
        state: name -> buffer (the flat layout), what a checkpoint stores.
    """

    def __init__(self, params, ops, size: int):
        self.params, self.ops = params, ops
        names = ("momentum",) if params.optimizer == "sgd" else ("m", "v")
        self.state = {name: ops.xp.zeros(size, ops.dtype) for name in names}

    def step(self, w, g, counters, lo: int = 0, hi: int | None = None) -> None:
        """Update elements [lo, hi) of the flat buffers (all of them by default): elementwise, so updating the
        buckets one by one gives the same parameters as one update."""
        p, part = self.params, slice(lo, hi)
        w, g, state = w[part], g[part], {k: v[part] for k, v in self.state.items()}
        if p.optimizer == "sgd":
            self.ops.sgd(w, g, state["momentum"], p.lr, p.momentum, counters)
        else:
            self.ops.adam(w, g, state["m"], state["v"], p.lr, p.betas[0], p.betas[1], p.eps, counters)


class Trainer:
    """The model's buffers on this rank and the steps over them.

    Attributes:
        w, g: flat parameters and gradients; optimizer: its state.
        counters: device [cursor, step] (see ops); step: the same step count on the host.
        buckets: the gradient buckets; graph: the captured step, once captured.
        l2: the L2Window keeping the network's activations and their gradients resident (GPU, inputs_first).
    """

    def __init__(self, ctx, comm, layout, ops, params, xs, ys, window_steps: int, initial: np.ndarray):
        xp = ops.xp
        self.layout, self.ops, self.params, self.xs, self.ys = layout, ops, params, xs, ys
        self.gpu = xp is not np
        self.micro, self.batch = params.accumulate, params.batch
        self.per_step = params.batch * params.accumulate
        self.scale = 1.0 / (params.batch * params.accumulate * ctx.size)
        self.w = xp.asarray(initial)
        self.g = xp.zeros(layout.size, ops.dtype)
        # the parameters the GEMMs read: a bfloat16 copy made at each step under precision bf16, else w itself
        self.wg = self.w if ops.storage == ops.dtype else xp.zeros(layout.size, ops.storage)
        self.optimizer = Optimizer(params, ops, layout.size)
        self.net = Network(layout, ops, params.batch, 1.0 - params.dropout, params.seed, ctx.rank)
        self.counters = xp.zeros(2, np.int64)
        self.step = 0
        self.idx = xp.zeros(window_steps * self.per_step, np.int32)
        self.buckets = plan_buckets(
            layout, int(params.bucket_mb * 2**20), ops.dtype.itemsize, split=params.split_gradients
        )
        self.exchange = GradientExchange(comm, self.g, self.buckets, params.overlap) if ctx.size > 1 else None
        if params.split_gradients and self.exchange is not None:  # one rank has nothing to reduce: layers stay whole
            self.net.row_blocks = row_blocks(layout, self.buckets)
        nb = len(self.buckets) if self.exchange else 0
        self.stream = xp.cuda.Stream(non_blocking=True) if self.gpu else None
        # inputs_first: layer 0's weight gradient would evict the other layers' operands from L2 (l2.py)
        self.l2 = (
            L2Window(self.stream, self.net.arena.data.ptr, self.net.arena.nbytes)
            if self.gpu and layout.inputs_first
            else None
        )
        per_slot = window_steps if self.gpu else 1  # events are read after the window; host times at once
        self.marks = (
            [make_marks("gpu" if self.gpu else "cpu", self.micro, nb) for _ in range(per_slot)]
            if params.phases
            else None
        )
        # params.update_in_backward (one rank: with more, an update waits for its allreduce): each layer updated as
        # soon as backward is done with it, on a second stream on a GPU, beside the rest of backward
        self.update_in_backward = params.update_in_backward and ctx.size == 1
        self.update_stream = None
        if self.gpu and self.update_in_backward:
            cupy = xpmod.cupy
            self.update_stream = cupy.cuda.Stream(non_blocking=True)
            self._freed = [cupy.cuda.Event(disable_timing=True) for _ in range(layout.layers)]
            self._updated = cupy.cuda.Event(disable_timing=True)
        self.graph = None  # the captured step
        self.graph_marked = None  # the same step with its phase marks (the window's last step), once captured
        self.graph_marks = None
        self.last_marks = None  # those of the last timed step (step_timeline)
        if self.gpu:  # the copies above ran on the legacy stream, which the non-blocking step stream does not wait for
            xp.cuda.Device().synchronize()

    # -- state ----------------------------------------------------------------------------

    def set_state(self, weights, state: dict, step: int) -> None:
        """Continue from a checkpoint: parameters, optimizer buffers and step count."""
        xpmod.copy_into(self.w, weights)
        for name, buf in self.optimizer.state.items():
            xpmod.copy_into(buf, state[name])
        self.step = step
        self.counters[STEP] = step

    def host_state(self) -> tuple[np.ndarray, dict]:
        """Parameters and optimizer buffers as host arrays."""
        self.synchronize()
        return xpmod.to_host(self.w), {k: xpmod.to_host(v) for k, v in self.optimizer.state.items()}

    def load_window(self, indices: np.ndarray) -> None:
        """Batch indices of the next window's steps (steps x batch*accumulate, local rows)."""
        with self._on_stream():
            self.idx[: indices.size] = self.ops.xp.asarray(indices.reshape(-1))
            self.counters[CURSOR] = 0
            self.net.loss_sum.fill(0)
            self.net.correct.fill(0)

    def take_window_stats(self) -> tuple[float, int]:
        """Loss summed over this window's samples on this rank, and right answers."""
        self.synchronize()
        return float(self.net.loss_sum.sum()), int(self.net.correct.sum())

    def synchronize(self) -> None:
        if self.gpu:
            self.stream.synchronize()

    @contextlib.contextmanager
    def _on_stream(self):
        if self.stream is None:
            yield
        else:
            with self.stream:
                yield

    # -- steps ----------------------------------------------------------------------------

    def train_step(self, marks=None, reduce: bool = True, update: bool = True) -> None:
        """One optimizer step (queued on the compute stream on a GPU)."""
        net, ops = self.net, self.ops
        mark = marks.mark if marks is not None else (lambda name: None)
        exchange = self.exchange if reduce else None
        mark("s")
        if self.wg is not self.w:
            ops.to_storage(self.w, self.wg)
        for j in range(self.micro):
            ops.gather(self.xs, self.ys, self.idx, self.counters, self.per_step, j * self.batch, net.x, net.y)
            net.forward(self.wg, self.counters, j, self.scale)
            mark(f"f{j}")
            done = None
            if exchange is not None and j == self.micro - 1:

                def done(layer, part):
                    exchange.layer_done(layer, marks, part)

            freed = self._update_layer if update and self.update_in_backward and j == self.micro - 1 else None
            net.backward(self.wg, self.g, accumulate=j > 0, layer_done=done, params_done=freed)
            if freed is not None and self.update_stream is not None:  # the next step reads what it updated
                self._updated.record(self.update_stream)
                xpmod.cupy.cuda.get_current_stream().wait_event(self._updated)
            mark(f"b{j}")
        updated = update and self.update_in_backward  # every layer already updated inside backward
        last = None  # the part of the buffers the update after the last wait covers (None: all)
        if exchange is not None:
            # params.update_per_bucket: each bucket's update runs as soon as its allreduce is done, those before
            # the last while the last allreduce runs (inside comm's exposed time); then the last bucket's
            early = (
                (lambda b: self.optimizer.step(self.w, self.g, self.counters, b.start, b.stop))
                if update and self.params.update_per_bucket and exchange.asynchronous
                else None
            )
            last = exchange.finish(marks, early)
        mark("w")
        if update and not updated:
            self.optimizer.step(self.w, self.g, self.counters, *(last or (0, None)))
        mark("o")
        if update:
            ops.advance(self.counters)

    def _update_layer(self, layer: int) -> None:
        """Update layer ``layer``'s parameters (and the padding after them) now that backward is done with them:
        on a GPU on the update stream, once the compute stream has reached this point."""
        lo, hi = self.layout.span(layer)
        if self.update_stream is None:
            self.optimizer.step(self.w, self.g, self.counters, lo, hi)
            return
        self._freed[layer].record()
        self.update_stream.wait_event(self._freed[layer])
        with self.update_stream:
            self.optimizer.step(self.w, self.g, self.counters, lo, hi)

    def run_window(self, steps: int, timer) -> None:
        """``steps`` optimizer steps (replays of the captured graph, once captured), their
        phases added to ``timer``."""
        with self._on_stream():
            for i in range(steps):
                faults.at("data")  # SPMD_FAULT's data phase: each step's batch (a host delay before it)
                if self.graph is not None:
                    marked = self.graph_marked is not None and i == steps - 1
                    (self.graph_marked if marked else self.graph).launch(self.stream)
                else:
                    marks = self.marks[i % len(self.marks)] if self.marks else None
                    self.train_step(marks)
                    if marks is not None:
                        marks.add_to(timer)
                        self.last_marks = marks
                self.step += 1
            if self.graph_marked is not None and steps:
                # The window's last step ran the graph with the marks: that step stands for all of them.
                self.graph_marks.add_to(timer, steps)
                self.last_marks = self.graph_marks

    def step_timeline(self) -> dict | None:
        """The last timed step's marks and bucket allreduces, microseconds from its start (marks.timeline), or
        None without phase marks."""
        if self.last_marks is None:
            return None
        self.synchronize()
        return self.last_marks.timeline()

    def eager_window(self, steps: int) -> None:
        """``steps`` steps launched one by one, never the captured graph: the reference a window of graph
        replays (or of any steps) is compared with, from the same state."""
        with self._on_stream():
            for _ in range(steps):
                self.train_step()
        self.synchronize()

    def replay_window(self, start: tuple, indices: np.ndarray, steps: int) -> np.ndarray:
        """The parameters after ``steps`` eager steps over ``indices`` from ``start`` = (step, weights,
        optimizer state); the trainer's own state is put back afterwards."""
        end_step = self.step
        weights, state = self.host_state()
        weights, state = weights.copy(), {k: v.copy() for k, v in state.items()}  # may be the live buffers
        self.set_state(start[1], start[2], start[0])
        self.load_window(indices)
        self.eager_window(steps)
        again = self.host_state()[0].copy()
        self.set_state(weights, state, end_step)
        return again

    def capture(self) -> None:
        """Capture one step in a CUDA graph, and the same step with its timing events when the driver lets them
        be captured (else the report has the step's total only). The window replays the first and ends with the
        second: event records inside a graph cost host and device time every step (bench/programs/train_sweep.py's
        graph-nophases measures it), and only the last step's events are read anyway."""
        self.graph = self._capture(None)
        marks = None
        if self.marks:
            marks = make_marks("gpu", self.micro, len(self.buckets) if self.exchange else 0)
            marks = marks if marks.can_capture else None
        if marks is not None:
            try:
                self.graph_marked, self.graph_marks = self._capture(marks), marks
            except Exception:  # e.g. a driver that cannot capture event records: the step's total only
                self.graph_marked = self.graph_marks = None

    def _capture(self, marks):
        cupy = xpmod.cupy
        self.ops.bind(self.stream)
        with self.stream:
            self.stream.begin_capture(cupy.cuda.runtime.streamCaptureModeRelaxed)
            try:
                if marks is not None:
                    marks.capturing = True
                self.train_step(marks)
            finally:
                graph = self.stream.end_capture()
                if marks is not None:
                    marks.capturing = False
        return graph

    def gradient_step(self, indices: np.ndarray) -> None:
        """One step's gradient, reduced over the ranks, without the update: the warm-up (kernels
        loaded, cuBLAS and NCCL initialised, so a graph can be captured from the first step on)
        whose gradient verification compares with a float64 reference."""
        self.load_window(indices)
        with self._on_stream():
            self.train_step(reduce=True, update=False)
        self.synchronize()

    def drop_graphs(self) -> None:
        """Step eagerly from now on (a capture failed on some rank)."""
        self.graph = self.graph_marked = self.graph_marks = None

    def close(self) -> None:
        self.drop_graphs()
        try:
            if self.l2 is not None:
                self.synchronize()
                self.l2.close()
        finally:
            self.ops.close()


# The same steps eagerly and as graph replays run the same kernels: equal but for rounding that a library
# may order differently; a parameter 1% off (a corrupt fault) is far above this.
EAGER_RTOL = 1e-5


def require_same_parameters(run: np.ndarray, again: np.ndarray, what: str) -> None:
    """VerificationError unless ``again`` matches the run's parameters within EAGER_RTOL (of each element
    plus the parameters' root mean square)."""
    diff = np.abs(again.astype(np.float64) - run)
    bound = EAGER_RTOL * (np.abs(run) + np.sqrt(np.mean(run.astype(np.float64) ** 2)))
    bad = ~np.isfinite(run) | (diff > bound)
    if bad.any():
        i = int(np.argmax(bad))
        raise VerificationError(
            f"{what} end on other parameters: element {i} is {float(run[i])!r} in the run, "
            f"{float(again[i])!r} again ({int(bad.sum())} of {bad.size} differ)"
        )

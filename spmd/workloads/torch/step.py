"""The DDP steps of one rank: the user's module wrapped in DistributedDataParallel, the optimizer, the batch
gather, the phase marks and the strategies. ``ddp`` is eager, ``compile`` is torch.compile over the DDP module, and
``ddp-graph`` captures the whole step once in a CUDA graph and replays it.

A window's sample indices live beside the rows (device or pinned host memory), so a step gathers its
micro-batches with no host work; under ddp-graph a device cursor picks the step's row of indices inside the
graph. The gradient allreduce is DDP's own (``allreduce_hook``'s division and allreduce); the hook around it
only notes when each bucket was handed over and when its allreduce ended (``timing.StepMarks``), and with an
armed ``corrupt`` fault changes one gradient element on its rank before the exchange.
"""

from __future__ import annotations

import contextlib
import time

from ...core import faults
from ...core.errors import ConfigError
from ...core.timing import host_side
from .compute import autocast, deterministic, make_optimizer, micro_seed, model_input, state_tensors
from .dist import group
from .phases import StepMarks

GRAPH_WARMUP = 11  # eager DDP iterations before capture (DDP's reducer settles its buckets in the first ones)


class InjectedWork:
    """A ``work`` fault's extra device work: square matrix products queued on the rank's device (timed once,
    so ``seconds`` of them take about that long), or on a CPU products until ``seconds`` have passed."""

    SIDE = 2048

    def __init__(self, torch, device, gpu: bool):
        self.torch, self.device, self.gpu = torch, device, gpu
        self.a = None
        self.seconds_each = 0.0

    def run(self, seconds: float) -> None:
        if seconds <= 0:
            return
        torch = self.torch
        if self.a is None:
            side = self.SIDE if self.gpu else 256
            self.a = torch.randn(side, side, device=self.device) / side**0.5
            self.seconds_each = self._time_one()
        if not self.gpu:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                self.a = torch.mm(self.a, self.a).clamp_(-1, 1)
            return
        for _ in range(max(1, round(seconds / self.seconds_each))):
            self.a = torch.mm(self.a, self.a).clamp_(-1, 1)

    def _time_one(self) -> float:
        torch = self.torch
        if not self.gpu:
            return 0.0
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.mm(self.a, self.a)
        start.record()
        for _ in range(10):
            torch.mm(self.a, self.a)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / 10


class Batches:
    """This rank's rows and targets, and the window's sample indices, where the steps read them."""

    def __init__(self, torch, x, y, placement: str, compute_device, input_dtype, transform):
        self.torch, self.x, self.y, self.placement = torch, x, y, placement
        self.compute_device, self.input_dtype, self.transform = compute_device, input_dtype, transform

    def take(self, rows):
        """The micro-batch of ``rows`` (indices where the data is) on the compute device, ready for the model."""
        x, y = self.x.index_select(0, rows), self.y.index_select(0, rows)
        if self.placement != "device":
            x, y = x.to(self.compute_device, non_blocking=True), y.to(self.compute_device, non_blocking=True)
        return model_input(x, self.input_dtype, self.transform), y


class Trainer:
    """One rank's training: DDP module, optimizer, steps, marks.

    Attributes:
        step: optimizer steps taken; losses (ddp-graph) / step_losses (eager): the window's per-step mean loss (device);
        bucket_bytes: DDP's gradient buckets (bytes, in the order of their index), as the last eager step ran them.
    """

    def __init__(
        self,
        torch,
        ctx,
        params,
        module,
        loss_fn,
        batches: Batches,
        window_steps: int,
        checks=None,
        first_exact: bool = False,
        find_unused: bool = False,
    ):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        from torch.nn.parallel import DistributedDataParallel as DDP

        self._allreduce = allreduce_hook  # DDP's own: divide by the world size, allreduce
        self.torch, self.ctx, self.params, self.batches = torch, ctx, params, batches
        self.gpu = ctx.device == "gpu"
        self.graph_mode = params.strategy == "ddp-graph"
        self.micro, self.batch = params.accumulate, params.batch
        self.module, self.loss_fn = module, loss_fn
        device_ids = [torch.cuda.current_device()] if self.gpu else None
        # ddp-graph: DDP made, warmed up and captured on one side stream (its reducer keeps the autograd nodes of
        # the stream it was made on; a capture on another stream would make the legacy stream wait on it)
        self.side = torch.cuda.Stream() if self.graph_mode else None
        if self.side is not None:
            self.side.wait_stream(torch.cuda.current_stream())
        self.find_unused = find_unused
        options = {"device_ids": device_ids, "bucket_cap_mb": params.bucket_mb, "find_unused_parameters": find_unused}
        options["process_group"] = group()  # the job's (a sweep's size: dist.sweep_groups), else the default
        with torch.cuda.stream(self.side) if self.side is not None else contextlib.nullcontext():
            self.ddp = DDP(module, **options)
        self.forward = torch.compile(self.ddp) if params.strategy == "compile" else self.ddp
        self.corrupting = faults.corrupting()
        self.injected = InjectedWork(torch, batches.compute_device, self.gpu)
        self.window = None  # the profiler over the next window's steps (spmd.report.capture.window)
        # verification's checked steps (checks.StepChecks), eager and deterministic, through the hooked DDP: each
        # rank's gradient kept as it enters the allreduce (a CUDA graph's replays run no Python: ddp-graph has none)
        self.checks = None if self.graph_mode else checks
        self.ranks_checked = self.checks is not None and self.checks.ranks_checked
        # ddp-graph and SyncBatchNorm: the first step's averaged gradient is compared instead (deterministic kernels,
        # except under ddp-graph, whose first step is a replay of the graph as captured)
        self.first_exact = first_exact and not self.graph_mode
        self.keep_first = first_exact
        self.checking = False  # the step now taken is checked: the hook keeps this rank's gradient
        self.checked_seconds = 0.0  # the checked steps' wall time, checks included (outside the timing)
        self.step_seconds: float | None = None  # the last window's wall time per timed step
        # bucket index -> (flat gradient on the device, [(parameter, elements)] in the bucket's order)
        self._names = {id(t): name for name, t in module.named_parameters()}
        self._copies: dict[int, object] = {}
        # The comm hook is Python: DDP then runs its allreduce through a Python future callback per bucket, slower
        # than DDP's C++ path. Under strategy ddp the marked and checked steps run through a hooked twin of the
        # same module (a DDP only acts on the backward of its own forward), so the other steps take plain DDP's
        # path; compile and a job with a corrupt fault keep one DDP.
        self.marked_ddp = self.ddp
        if params.phases or self.corrupting or self.ranks_checked:  # DDP's own allreduce, timed (or seen) around
            if params.strategy == "ddp" and not faults.job_injects("corrupt"):  # the same choice on every rank
                self.marked_ddp = DDP(module, **options)
            self.marked_ddp.register_comm_hook(group(), self._hook)  # the state allreduce_hook reduces over
        # where the module's own forward begins, after DDP's broadcast of the buffers (a rank late before its forward
        # makes the others wait there, not in the allreduce); eager only (a compiled forward would trace the hook)
        self.micro_index = 0
        # and around each SyncBatchNorm layer's forward, which gathers every rank's statistics: there too an early
        # rank waits for the late one (timed as comm_syncbn, not as its forward)
        self.syncbn = False
        if params.phases and params.strategy == "ddp":
            module.register_forward_pre_hook(self._module_begins)
            for layer in module.modules():
                if isinstance(layer, torch.nn.SyncBatchNorm):
                    layer.register_forward_pre_hook(self._syncbn_begins)
                    layer.register_forward_hook(self._syncbn_ends)
                    self.syncbn = True
        self.optimizer = make_optimizer(torch, params.optimizer, module.parameters(), capturable=self.graph_mode)
        data_device = batches.x.device
        self.idx = torch.zeros((window_steps, self.micro * self.batch), dtype=torch.int64, device=data_device)
        self.cursor = torch.zeros(1, dtype=torch.int64, device=batches.compute_device)  # ddp-graph: the step's row
        self.losses = torch.zeros(window_steps, dtype=torch.float32, device=batches.compute_device)  # ddp-graph
        self.step_losses: list = []  # eager: the window's per-step mean losses (0-d device tensors)
        self.i = 0  # the step within the window (eager)
        self.step = 0
        self.bucket_bytes: dict[int, int] = {}
        # one step in phase_every is marked (each CUDA event record costs host time); at least one a window
        self.every = min(params.phase_every, params.steps)
        self.scaled_to_window = 1.0  # the last window's marked phases, as a share of steps / marked (<1: capped)
        self.slots = (
            [StepMarks(torch, self.gpu, self.micro, self.syncbn) for _ in range(params.steps // self.every)]
            if params.phases
            else None
        )
        self.reseed = params.reseed if params.reseed is not None else draws_random_numbers(torch, module)
        self.current: StepMarks | None = None
        self.last: StepMarks | None = None
        self.graph = None
        self.first_grads: dict | None = None

    # -- the exchange ---------------------------------------------------------------------

    def _hook(self, state, bucket):
        index = bucket.index()
        if index == 0:  # a step's first bucket (DDP launches them in order): its first step held every gradient in
            self.bucket_bytes = {}  # one bucket, then DDP rebuilt them; the last step's layout is the one that runs
        self.bucket_bytes[index] = bucket.buffer().numel() * bucket.buffer().element_size()
        if self.corrupting:
            faults.corrupt(self.ctx.xp.asarray(bucket.buffer().detach()), "gradient bucket")
        if self.checking and self.ranks_checked:  # this rank's own gradient, before the allreduce averages it away
            names = [(self._names[id(t)], t.numel()) for t in bucket.parameters()]  # DDP rebuilds its buckets
            self._copies[index] = (bucket.buffer().detach().clone(), names)
        marks = self.current
        if marks is None:
            return self._allreduce(state, bucket)
        marks.comm_start(index)
        future = self._allreduce(state, bucket)

        def ended(done):
            marks.comm_end(index)
            return done.value()

        return future.then(ended)

    def _module_begins(self, module, args) -> None:
        """The module's forward pre-hook: on a marked step, its micro-batch's mark ``m`` (phases.StepMarks)."""
        if self.current is not None:
            self.current.mark(f"m{self.micro_index}")

    def _syncbn_begins(self, layer, args) -> None:
        if self.current is not None:
            self.current.syncbn_begins()

    def _syncbn_ends(self, layer, args, out) -> None:
        if self.current is not None:
            self.current.syncbn_ends()

    # -- steps ----------------------------------------------------------------------------

    def load_window(self, indices) -> None:
        """The next window's local row numbers (steps x batch*accumulate)."""
        self.idx[: len(indices)].copy_(self.torch.from_numpy(indices).to(self.idx.device))
        self.cursor.zero_()
        self.i = 0
        self.step_losses = []

    def train_step(self, marks: StepMarks | None, checked: bool = False) -> None:
        """One optimizer step over ``accumulate`` micro-batches (queued on the device on a GPU); a ``checked`` one
        with deterministic kernels and verification's checks around it (checks.StepChecks)."""
        torch, k = self.torch, self.micro
        mark = marks.mark if marks is not None else (lambda name: None)
        mark("s")
        if self.graph_mode:
            rows_all = self.idx.index_select(0, self.cursor.to(self.idx.device)).view(-1)
        else:
            self.optimizer.zero_grad(set_to_none=True)
            rows_all = self.idx[self.i]
        checked = checked and self.checks is not None
        exact = checked or (self.first_exact and self.step == 0)
        if checked:
            self.checks.begin(self.optimizer)
            self.checking = True
        ddp = self.marked_ddp if marks is not None or checked else self.ddp
        forward = ddp if ddp is not self.ddp or exact else self.forward
        try:
            with deterministic(torch, self.gpu) if exact else contextlib.nullcontext():
                total = self._micro_batches(forward, ddp, mark, rows_all)
        finally:
            self.checking = False
        if checked:
            self.checks.before_update()
        if not self.graph_mode:  # SPMD_FAULT's optimizer phase (a replay runs no Python)
            faults.at("optimizer")
        self.optimizer.step()
        if checked:
            copies, self._copies = self._copies, {}
            self.checks.end(self.step, copies, self.optimizer)
        mark("o")
        mean = total / k if k > 1 else total
        if self.graph_mode:  # inside the graph: the step's row of the device buffer, chosen by the device cursor
            self.losses.index_copy_(0, self.cursor, mean.float().reshape(1))
            self.cursor.add_(1)
        else:  # eager: the tensor kept, stacked once a window (a copy into a slice would cost host time every step)
            self.step_losses.append(mean)
            self.i += 1

    def _micro_batches(self, forward, ddp, mark, rows_all):
        """Forward and backward of the step's micro-batches (DDP's allreduce in the last backward); the summed loss."""
        torch, k, b = self.torch, self.micro, self.batch
        total = None
        for j in range(k):
            if not self.graph_mode:  # SPMD_FAULT's data and compute phases, entered by every step
                faults.at("data")
            x, y = self.batches.take(rows_all if k == 1 else rows_all[j * b : (j + 1) * b])
            mark(f"d{j}")
            if j == 0 and not self.graph_mode:
                self._enter_compute()
            if self.reseed and not self.graph_mode:  # costly on a GPU: only for models that draw random numbers
                torch.manual_seed(micro_seed(self.params.seed, self.step, self.ctx.rank, j))
            with ddp.no_sync() if j < k - 1 else contextlib.nullcontext():
                mark(f"a{j}")
                self.micro_index = j
                with autocast(torch, self.params.precision, self.gpu):
                    loss = self.loss_fn(self._forward(forward, x), y)
                mark(f"f{j}")
                (loss / k if k > 1 else loss).backward()
                mark(f"b{j}")
            total = loss.detach() if total is None else total + loss.detach()
        return total

    def _enter_compute(self) -> None:
        """SPMD_FAULT's compute phase, entered once a step, and a ``work`` fault's extra device work."""
        faults.at("compute")
        self.injected.run(faults.injected_work_seconds())

    def _forward(self, forward, x):
        try:
            return forward(x)
        except RuntimeError as exc:  # DDP's reducer: an earlier backward left parameters without a gradient
            if "Expected to have finished reduction" not in str(exc):
                raise
            raise unfinished_reduction(self.step - 1) from None

    def run_window(self, plan: list[bool], timer) -> None:
        """A window's optimizer steps, ``plan`` saying of each whether verification checks it; the others' phases
        added to ``timer`` (``step`` alone under ddp-graph): the marked steps' phases, scaled to the window's steps.
        A checked step runs outside the timing: the device drained before and after it, its wall time taken out of
        the repeat's (``PhaseTimer.exclude``), and the repeat's time is its timed steps' scaled to all its steps
        (``PhaseTimer.scale_total``)."""
        marked = []
        profiled = self.window
        began = time.perf_counter()
        excluded = 0.0
        steps = 0  # the timed ones
        every = max(1, min(self.every, plan.count(False)))  # one marked a window, its checked steps left out
        for n, checked in enumerate(plan):
            if profiled is not None:
                profiled.before(n)
            if checked and self.checks is not None:
                self.synchronize()
                t0 = time.perf_counter()
                self.train_step(None, checked=True)
                self.step += 1
                self._keep_first_grads()
                self.synchronize()
                seconds = time.perf_counter() - t0
                excluded += seconds
                self.checked_seconds += seconds
                if timer is not None:
                    timer.exclude(seconds)
                if profiled is not None:
                    profiled.after(n)
                continue
            steps += 1
            marks = (
                self.slots[len(marked)] if self.slots and steps % every == 0 and len(marked) < len(self.slots) else None
            )
            if marks is not None:
                marks.reset()
                marked.append(marks)
            if self.graph is not None:
                if marks is not None:
                    marks.mark("s")
                faults.at("data")  # a replay runs no Python: the step's host delays come before it
                self._enter_compute()
                self.graph.replay()
                if marks is not None:
                    marks.mark("o")
            else:
                self.current = marks
                self.train_step(marks)
                self.current = None
            self.step += 1
            if profiled is not None:
                profiled.after(n)
            self._keep_first_grads()
        self.synchronize()
        window = time.perf_counter() - began - excluded  # the timed steps'
        if steps:
            self.step_seconds = window / steps
        if steps and steps < len(plan):  # the window's time at its timed steps' rate
            window *= len(plan) / steps
            if timer is not None:
                timer.scale_total(len(plan) / steps)
        if marked:
            # the marked steps stand for the window's: scaled to its steps, never beyond its wall time (a marked step
            # slower than the others would otherwise give phases longer than the repeat that holds them)
            timed = sum(m.phases_graph() if self.graph is not None else m.phases()["step"] for m in marked)
            scale = len(plan) / len(marked)
            if timed > 0 and scale * timed > window:
                scale = window / timed
            self.scaled_to_window = scale * len(marked) / len(plan)
            for marks in marked:
                start = self._placed(marks, timer)
                if self.graph is not None:
                    timer.add("step", scale * marks.phases_graph())
                    if start is not None:
                        timer.place("step (graph replay)", start, start + marks.phases_graph(), "gpu")
                    continue
                for name, track, a, b in marks.drawn() if start is not None else ():
                    timer.place(name, start + a, start + b, track)
                phases = marks.phases()
                for name, seconds in phases.items():
                    timer.add(name, scale * seconds)
                if self.gpu:  # where a phase's span is the device's, the host's own seconds beside it
                    for name, seconds in marks.host_phases().items():
                        timer.add(host_side(name), scale * seconds)
                # the phases every report has: compute (the step's own work) and comm (what it waited for: the exposed
                # allreduce, and the buffers' broadcast before each forward, where an early rank waits for a late one)
                comm = phases["comm_exposed"] + phases["comm_buffers"] + phases.get("comm_syncbn", 0.0)
                timer.add("compute", scale * (phases["step"] - comm))
                timer.add("comm", scale * comm)
            self.last = marked[-1]

    def _keep_first_grads(self) -> None:
        """After the first step (checked or not): its averaged gradients, which ddp-graph's and SyncBatchNorm's
        verification compares with the one-process reference's."""
        if self.step == 1 and self.keep_first:
            self.first_grads = {
                name: t.grad.detach().clone() for name, t in self.module.named_parameters() if t.grad is not None
            }

    def _placed(self, marks, timer) -> float | None:
        """Where a marked step started, in seconds from the repeat's start (None: not known)."""
        if not self.gpu:
            return timer.relative(marks.t["s"])
        handle = marks.start_handle()
        return timer.event_offset(handle) if handle is not None else None

    def record_graph(self, saved_state) -> None:
        """ddp-graph: warm DDP up eagerly on a side stream, capture one step, then put parameters, buffers and the
        optimizer back to ``saved_state`` (what they were before the warm-up): the warm-up trains nothing."""
        torch = self.torch
        torch.cuda.synchronize()
        side = self.side
        side.wait_stream(torch.cuda.current_stream())
        graph_mode, self.graph_mode = self.graph_mode, False
        try:
            with torch.cuda.stream(side):
                for _ in range(GRAPH_WARMUP):
                    self.i, self.step_losses = 0, []
                    self.train_step(None)
        finally:
            self.graph_mode = graph_mode
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.optimizer.zero_grad(set_to_none=True)
        self.cursor.zero_()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):  # the warm-up's stream: DDP keeps its autograd nodes on it
            self.train_step(None)
        self.graph = graph
        with torch.no_grad():
            for tensor, value in zip(state_tensors(self.module), saved_state):
                tensor.copy_(value)
            for state in self.optimizer.state.values():
                for value in state.values():
                    if torch.is_tensor(value):
                        value.zero_()
        self.cursor.zero_()
        torch.cuda.synchronize()

    def window_losses(self, steps: int):
        """The window's per-step losses on the host (NumPy)."""
        self.synchronize()
        if self.graph is not None:
            return self.losses[:steps].cpu().numpy()
        return self.torch.stack(self.step_losses[:steps]).float().cpu().numpy()

    def synchronize(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()

    def timeline(self) -> dict | None:
        if self.last is None or self.graph is not None:
            return None
        self.synchronize()
        return self.last.timeline()


RANDOM_MODULES = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "RReLU")


def unfinished_reduction(step: int) -> ConfigError:
    """DDP's reducer waited for parameters the loss of ``step`` never reached (its allreduce never completed)."""
    return ConfigError(
        f"params.find_unused: the loss of step {step} reached none of some parameters that DDP waited for (a forward "
        f"whose control flow follows the data or the step): set params.find_unused: true (DDP's "
        f"find_unused_parameters)"
    )


def draws_random_numbers(torch, module) -> bool:
    """Whether the model holds a module that draws random numbers in training (dropout): then every micro-batch's
    forward is seeded, so the reference draws the same masks. A forward that calls the RNG itself needs
    ``params.reseed: true`` (verification says so when the masks differ)."""
    kinds = tuple(getattr(torch.nn, name) for name in RANDOM_MODULES)
    return any(
        isinstance(m, kinds) and getattr(m, "p", 1.0) > 0 or isinstance(m, torch.nn.RReLU) for m in module.modules()
    )

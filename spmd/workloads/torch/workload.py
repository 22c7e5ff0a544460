"""Workload ``torch``: the user's own ``torch.nn.Module`` trained data-parallel under spmd's runtime.

One MPI rank per GPU (or CPU rank), torch.distributed joined from MPI (``dist``), the module wrapped in
DistributedDataParallel (``step``). Step k's global batch is the same rows whatever the rank count (the
sampler of the train workload: P logical shards, one permutation stream each, P = the global batch by
default), so N ranks x batch b train exactly like one rank x batch N*b. A repeat is ``params.steps``
optimizer steps. Verified against a one-process reference with DDP's semantics (``reference``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time

import numpy as np

from ...core import faults
from ...core.cpus import reader_threads
from ...core.errors import InputError
from ...core.files import MARK, discard, publish, require_replaceable, temp_beside
from ...core.memory import free_device_memory, require_memory
from ...core.timing import enter_phase
from ...core.units import fmt_bytes
from ...io.hdf5 import Piece, RankInput, open_h5
from ...io.reader import RowReader
from ..training.base import TrainingWorkload
from ..training.checks import require_finite_losses
from ..training.data import Sampler
from . import dist, sweep
from .checks import RingConnection, StepChecks
from .compute import autocast, deterministic, set_precision, state_tensors
from .inputs import check_inputs, check_rows, label_array, targets, write_targets
from .params import TorchParams, check_job
from .phases import PHASES
from .schedule import Budget, CheckSchedule, draw_seed
from .step import Batches, Trainer
from .user_model import (
    build_model,
    loss_function,
    parameter_layout,
    require_same_layout,
    require_scalar_loss,
    settle_unused,
    transform_function,
    user_call,
)
from .verify import verify_torch

OPTIMIZER_STATES = {"sgd": 1, "adam": 2, "adamw": 2}  # tensors the optimizer keeps per parameter
# a brief run's repeat (the capture pass's, before its captured steps): DDP rebuilds its buckets after the first step
# and the allocator settles within a few
BRIEF_STEPS = 4


class TorchWorkload(TrainingWorkload):
    name = "torch"
    Params = TorchParams
    STEPPED = True
    OUTPUT_FILES = ("save",)
    MAY_SKIP_VERIFY = True
    METRIC_PHASES = PHASES  # a step's phases (phases.py), one home

    # -- configuration hooks -----------------------------------------------------------

    @classmethod
    def input_recipe(cls, cfg) -> dict:
        p = cfg.params
        return {"loss": p.loss, "labels": p.labels.dataset, "targets": targets(p)}

    @classmethod
    def finish_input(cls, cfg, dataset) -> dict:
        """``spmd generate``: targets for the generated rows from a fixed random teacher network on the flattened
        rows: class numbers (cross_entropy; ``options.classes``, default 10) or values (mse; ``options.outputs``)."""
        return write_targets(cfg, dataset)

    # -- set-up ------------------------------------------------------------------------

    @classmethod
    def load_libraries(cls, cfg) -> None:
        """PyTorch first: importing it loads the NCCL (and cuBLAS) it ships with, so DDP runs on those, as in a
        script of the user's own, and spmd's CuPy NCCL communicator, opened next, shares that NCCL. Opened first,
        CuPy's NCCL would be the libnccl.so.2 PyTorch got (``result.libraries`` says which ran)."""
        dist.import_torch()

    @classmethod
    def brief_config(cls, cfg):
        return dataclasses.replace(
            cfg, params=dataclasses.replace(cfg.params, steps=min(cfg.params.steps, BRIEF_STEPS))
        )

    @classmethod
    def sweep_session(cls, ctx, cfg, sizes: list[int]):
        return sweep.session(ctx, cfg, sizes)  # warmed at once, the build reused, the groups joined once

    def setup(self, ctx, cfg, comm):
        self.started = time.perf_counter()  # the run's wall time so far, for verification's budget
        self.last_window = None  # the window holding the run's last step, where known (``schedule``)
        self.ctx, self.cfg, self.comm, self.params = ctx, cfg, comm, cfg.params
        self.trainer = None
        self.joined = False
        self.ring = None  # checks.RingConnection, where the ring's gradients go over NCCL
        self.engines = None
        p = self.params
        torch = self.torch = ctx.agree(dist.import_torch)
        ctx.agree(check_job, cfg, ctx.device == "gpu", faults.corrupting())
        if ctx.device == "cpu":
            torch.set_num_threads(ctx.threads.count)  # spmd.core.host: the rank's share, or as given
        set_precision(torch, p.precision)
        self.rows, self.row_shape, self.dtype, self.label_shape = ctx.agree(self._check_inputs)
        self.global_batch = p.batch * p.accumulate * ctx.size
        self.shards = p.data_shards or self.global_batch
        self.sampler = ctx.agree(Sampler, self.rows, self.shards, ctx.size, ctx.rank, self.global_batch, p.seed)
        self.backend = dist.join(ctx, ctx.device, cfg.timeout_s, graph=p.strategy == "ddp-graph")
        self.joined = True
        if self.ranks_checked and ctx.size > 1 and ctx.device == "gpu":  # NCCL's pairs connect while set-up goes on
            self.ring = RingConnection(torch, ctx.rank, ctx.size, torch.cuda.current_device())
        self.loss_fn = ctx.agree(loss_function, torch, p.loss)
        self.transform = ctx.agree(transform_function, p.transform)
        gpu = ctx.device == "gpu"
        self.compute_device = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
        module = ctx.agree(build_model, torch, p)
        require_same_layout(ctx, parameter_layout(module))
        self.parameters = sum(t.numel() for t in module.parameters() if t.requires_grad)
        self.gradient_bytes = sum(t.numel() * t.element_size() for t in module.parameters() if t.requires_grad)
        ctx.agree(self._require_model_memory)
        enter_phase("read")
        x, y, self.read_seconds, self.engines = ctx.agree(self._read)
        enter_phase("h2d")
        module, self.param_dtype = ctx.agree(self._to_device, module)
        self.batches = ctx.agree(self._place, x, y, self.param_dtype)
        self.start_state = copy.deepcopy(module) if self.start_state_wanted else None
        trial = time.perf_counter()
        unused = ctx.agree(self._trial_step, module)
        self.trial_seconds = time.perf_counter() - trial  # a checked micro-batch's work, cold: the first estimate
        find_unused, self.unused = settle_unused(ctx, unused, p.find_unused)
        seed = p.verify_seed if p.verify_seed is not None else ctx.comm.bcast(draw_seed() if ctx.rank == 0 else None)
        # no checked step under ddp-graph or verify: none (an empty plan: every window's steps timed)
        first, per_window = (p.verify_steps, p.verify_per_repeat) if self.checks_run else (0, 0)
        self.check_plan = CheckSchedule(first, per_window, seed)
        self.budget = Budget(p.verify_budget)
        checks = ctx.agree(StepChecks, self, module, self.ranks_checked, self.ring) if self.checks_run else None
        self.trainer = ctx.agree(
            Trainer,
            torch,
            ctx,
            p,
            module,
            self.loss_fn,
            self.batches,
            p.steps,  # a window's steps, its checked ones among them
            checks=checks,
            first_exact=self.first_step_checked,
            find_unused=find_unused,
        )
        self.plan = [False] * p.steps
        if p.strategy == "ddp-graph":
            self.trainer.load_window(self.sampler.window(0, p.steps))
            saved = [t.detach().clone() for t in state_tensors(module)]
            ctx.agree(self.trainer.record_graph, saved)
        self.windows_run, self.losses = 0, []

    def _check_inputs(self):
        return check_inputs(self.cfg)

    def _require_model_memory(self) -> None:
        """Parameters, gradients, DDP's buckets and the optimizer's state must fit on one device: this workload
        is data-parallel (every GPU holds the whole model)."""
        p = self.params
        states = OPTIMIZER_STATES[p.optimizer.name]
        # the marked and checked steps' DDP keeps buckets of its own (step.Trainer); a checked step keeps copies of
        # the step's start, averaged gradient and optimizer state, the update taken again on copies of the start and
        # state (twice where the first differs: the first's parameters kept beside the second's copies), and the
        # ring's model, gradients and two flat ones
        twin = (p.phases or self.ranks_checked) and p.strategy == "ddp"
        copies = self.checks_run * (4 + 2 * states) + self.ranks_checked * 4 + self.start_state_wanted
        need = self.gradient_bytes * (3 + states + twin + copies)
        require_memory(
            need,
            "device",
            self.ctx,
            f"the model's {self.parameters:,} parameters ({fmt_bytes(self.gradient_bytes)}"
            f"), their gradients, DDP's buckets and the {self.params.optimizer.name} state"
            + (
                ", and verification's copies at its checked steps (verify: none, or params.verify_steps and "
                "params.verify_per_repeat 0, go without them)"
                if self.checks_run
                else ""
            )
            + " (the torch workload is data-parallel: every device holds the whole model)",
        )

    def one_rank_sampler(self) -> Sampler:
        """The sampler of the same training on one rank: each step's global batch, the ranks' rows in rank order (what
        verification recomputes from)."""
        return Sampler(self.rows, self.shards, 1, 0, self.global_batch, self.params.seed)

    @property
    def start_state_wanted(self) -> bool:
        """Rank 0 keeps the start for the one-process reference (ddp-graph, SyncBatchNorm, no checked step)."""
        return self.ctx.rank == 0 and self.first_step_checked

    @property
    def checks_run(self) -> bool:
        """Whether steps are checked as the run takes them (checks.StepChecks): not under ddp-graph, whose replays
        run no Python, nor where params.verify_steps and params.verify_per_repeat are both 0."""
        p = self.params
        return self.cfg.verify != "none" and p.strategy != "ddp-graph" and (p.verify_steps + p.verify_per_repeat) > 0

    @property
    def ranks_checked(self) -> bool:
        """Whether each rank's own gradient is checked at those steps (not under SyncBatchNorm, whose gradient on a
        rank depends on every rank's rows)."""
        return self.checks_run and not self.params.sync_batchnorm

    @property
    def first_step_checked(self) -> bool:
        """Where no rank's own gradient is checked, the first step's averaged gradient is, against the reference."""
        return self.cfg.verify != "none" and not self.ranks_checked

    def _read(self):
        """This rank's rows (its shards of the sampler) by the config's io engine, and their targets."""
        start, stop = self.sampler.local_rows
        path, name, p = self.cfg.input.path, self.cfg.input.dataset, self.params
        plan = RankInput((Piece(path, name, start, stop),), self.row_shape, self.dtype)
        require_memory(plan.nbytes, "host", self.ctx, f"rows {start}-{stop} of {path}:{name}")
        t0 = time.perf_counter()
        x = np.empty(plan.shape, plan.dtype)
        reader = RowReader(
            plan, self.cfg.io, reader_threads(self.cfg.io.threads, self.ctx.local_size, self.ctx.local_rank)
        )
        try:
            reader.read(x, self.cfg.check_finite)
        finally:
            reader.close()
        engines = reader.engines()
        faults.poison_rows(x)
        with open_h5(p.labels.path or path) as f:
            y = f[p.labels.dataset][start:stop]
        seconds = time.perf_counter() - t0
        check_rows(self.cfg, x, y, start)
        return x, y, seconds, engines

    def input_engines(self):
        return self.engines

    def _place(self, x, y, param_dtype) -> Batches:
        """The rows on the device when they fit beside the model (else pinned host memory, said in the report)."""
        torch, gpu = self.torch, self.ctx.device == "gpu"
        tx, ty = torch.from_numpy(x), torch.from_numpy(label_array(y, self.params.loss))
        placement = "host"
        if gpu:
            room = free_device_memory() - 4 * self.gradient_bytes * 2  # leave the model and its activations room
            if x.nbytes + y.nbytes < 0.5 * room:
                tx, ty, placement = tx.to(self.compute_device), ty.to(self.compute_device), "device"
            else:
                tx, ty, placement = tx.pin_memory(), ty.pin_memory(), "pinned host"
        else:
            placement = "device"  # host memory is the CPU's device memory
        return Batches(torch, tx, ty, placement, self.compute_device, param_dtype, self.transform)

    def _to_device(self, module):
        """The module on the compute device (SyncBatchNorm where asked), in training mode, and its parameters' dtype."""
        torch = self.torch
        module = module.to(self.compute_device)
        if self.params.sync_batchnorm:
            module = torch.nn.SyncBatchNorm.convert_sync_batchnorm(module, process_group=dist.group())
        module.train()
        return module, next(t.dtype for t in module.parameters() if t.is_floating_point())

    def _trial_step(self, module) -> list[str]:
        """Forward, loss and backward of this rank's first micro-batch without DDP, state put back: a model that
        cannot take the rows, a loss that is not a scalar, or a batch that does not fit in memory ends the job
        here (exit 2), named, before any rank steps. Run as the checked steps will be (deterministic kernels, SDPA's
        math attention, which holds every attention matrix: the most memory a step takes). Returns the parameters
        the loss did not reach."""
        torch, p, gpu = self.torch, self.params, self.ctx.device == "gpu"
        rows = torch.from_numpy(self.sampler.window(0, 1)[0][: p.batch].astype(np.int64)).to(self.batches.x.device)
        saved = [t.detach().clone() for t in module.buffers()]
        checked = self.checks_run or self.first_step_checked
        try:
            x, y = self.batches.take(rows)
            what = f"a micro-batch of {p.batch} rows of shape {list(self.row_shape)} {self.dtype}"
            with autocast(torch, p.precision, gpu), deterministic(torch, gpu) if checked else contextlib.nullcontext():
                out = user_call("params.model", f"{p.model} (forward of {what})", module, x)
                loss = user_call(
                    "params.loss",
                    f"{p.loss} (on the model's output {_shape(out)} and targets {_shape(y)})",
                    self.loss_fn,
                    out,
                    y,
                )
            require_scalar_loss(torch, loss, p.loss)
            loss.backward()
            return [name for name, t in module.named_parameters() if t.requires_grad and t.grad is None]
        except torch.cuda.OutOfMemoryError as exc:
            free, total = torch.cuda.mem_get_info()
            raise InputError(
                f"out of GPU memory in the first step at params.batch {p.batch}: "
                f"{str(exc).splitlines()[0][:200]} ({fmt_bytes(free)} of {fmt_bytes(total)} free now): "
                f"use a smaller batch (params.accumulate keeps the global batch)"
                + (
                    ", or verify: none (the steps verification checks attend through SDPA's math backend)"
                    if checked
                    else ""
                )
            ) from None
        finally:
            module.zero_grad(set_to_none=True)
            with torch.no_grad():
                for t, v in zip(module.buffers(), saved):
                    t.copy_(v)

    # -- the timed loop ----------------------------------------------------------------

    def prepare(self):
        if self.windows_run:
            self.ctx.agree(self._check_losses)
        st = self.trainer
        self.plan = self.check_plan.window(
            self.windows_run, st.step, self.params.steps, self._draws_granted(), self.windows_run == self.last_window
        )
        st.load_window(self.sampler.window(st.step, len(self.plan)))

    def schedule(self, warmup: int, repeats: int) -> tuple[int, int]:
        """The window that holds the run's last step, where it is known: fixed repeats, nothing captured after them
        (its last step is checked there; otherwise one more step after the repeats is)."""
        fixed = self.cfg.repeats != "auto" and not self.cfg.capture.steps
        self.last_window = warmup + repeats - 1 if fixed else None
        return warmup, repeats

    def _draws_granted(self) -> int:
        """How many of the next window's random checks fit verification's budget (schedule.Budget): rank 0's
        reckoning, the same for every rank."""
        plan, st = self.check_plan, self.trainer
        if st.checks is None or not plan.per_window or self.budget.share >= 1:
            return plan.per_window

        def reckon() -> int:
            made, spent = len(st.checks.results), st.checked_seconds
            per_check = self.budget.per_check(made, spent, st.step_seconds, self.trial_seconds)
            owed = max(0, plan.first - st.step) + int(plan.last)  # the first steps still to come and the last
            elapsed = time.perf_counter() - self.started
            return self.budget.granted(
                plan.per_window, elapsed, spent + st.checks.setup_seconds, per_check, owed * per_check
            )

        return self.ctx.comm.bcast(reckon() if self.ctx.rank == 0 else None)

    def run(self, timer):
        enter_phase("compute", fault=False)  # a step enters data and compute: faults fire in each (step.py)
        self.trainer.run_window(self.plan, timer)
        self.windows_run += 1

    def run_steps(self, window):
        """The profiler's window (config ``capture``): its steps untimed, never marked, their losses checked like
        any window's. Steps after a capture run slower (CUPTI stays active after a profiler stops), so none of the
        timed ones follows it."""
        p, st = self.params, self.trainer
        self.ctx.agree(self._check_losses)
        # the timed phases miss these collectives (a graph's replay; SyncBatchNorm's where its layers were not
        # marked, as in a compiled forward): the captured steps alone may name a straggler. Marked, its forward's
        # gathers are comm_syncbn; its backward's allreduce stays inside backward, as a layer's own kernels do
        window.untimed_collectives = p.strategy == "ddp-graph" or (p.sync_batchnorm and not st.syncbn)
        st.load_window(self.sampler.window(st.step, window.length))
        slots, st.slots = st.slots, []
        st.window = window
        self.plan = [False] * window.length
        try:
            st.run_window(self.plan, None)
        finally:
            st.window, st.slots = None, slots

    def _check_losses(self, keep: bool = True) -> None:
        """The last window's losses finite, or VerificationError naming the step (exit 3)."""
        losses = self.trainer.window_losses(len(self.plan))
        require_finite_losses(losses, self.trainer.step - len(losses))
        if keep:
            self.losses.append(float(np.mean(losses)))

    # -- verification ------------------------------------------------------------------

    def verify(self):
        self.ctx.agree(self._check_losses)
        st = self.trainer
        made = st.checks.results if st.checks is not None else []
        if self.check_plan.last and st.checks is not None and not (made and made[-1]["step"] == st.step - 1):
            # the run's last step checked (one more step): a change from any step on to the end cannot escape
            self.plan = [True]
            st.load_window(self.sampler.window(st.step, 1))
            st.run_window(self.plan, None)
            self.ctx.agree(self._check_losses, False)
        return verify_torch(self)

    # -- save, report --------------------------------------------------------------------

    def save(self):
        if self.params.save is None:
            return None
        return self.ctx.agree(self._save, self.params.save.path, root_only=True)

    def _save(self, path: str) -> str:
        """The trained state_dict, by torch.save, its record in the state_dict's metadata (``spmd_record``)."""
        torch = self.torch
        require_replaceable(path, "the save", self.cfg.overwrite)
        state = self.trainer.module.state_dict()
        out = type(state)((k, v.detach().cpu()) for k, v in state.items())
        out._metadata = dict(getattr(state, "_metadata", {}))
        out._metadata["spmd_record"] = {"record": MARK, "steps": self.trainer.step, "model": self.params.model}
        tmp = temp_beside(path)
        try:
            torch.save(out, tmp)
            publish(tmp, path, self.cfg.overwrite)
        except OSError as exc:
            raise InputError(f"{path}: cannot write the save ({exc.strerror or exc})") from None
        finally:
            discard(tmp)
        return path

    def result(self):
        p, st = self.params, self.trainer
        buckets = self._buckets()
        return {
            "model": p.model,
            "parameters": self.parameters,
            "gradient_bytes": self.gradient_bytes,
            "buckets": buckets,
            "bucket_mb": p.bucket_mb,
            "strategy": p.strategy,
            "precision": p.precision,
            "backend": self.backend,
            "batch_per_rank": p.batch,
            "accumulate": p.accumulate,
            "global_batch": self.global_batch,
            "data_shards": self.shards,
            "steps": st.step,
            "steps_per_repeat": p.steps,
            "input_rows": self.rows,
            "row_shape": list(self.row_shape),
            "data_placement": self.batches.placement,
            "read_seconds": self.read_seconds,
            "loss_per_window": self.losses,
            "step_timeline_us": st.timeline(),
            "optimizer": p.optimizer.name,
            "reseed": st.reseed,
            "find_unused_parameters": st.find_unused,
            "unused_parameters": self.unused,
            "phases_marked_every": st.every if p.phases else None,
            # below 1 where the marked steps, scaled to the window, would have outlasted it (capped at its wall time)
            "phases_scaled_to_window": round(st.scaled_to_window, 4) if p.phases else None,
            "save": p.save.path if p.save else None,
            "libraries": dist.libraries(self.torch, self.ctx.device == "gpu"),
        }

    def _buckets(self) -> list[int]:
        """DDP's gradient buckets in bytes: as the hook saw them, else from DDP's logging data."""
        seen = self.trainer.bucket_bytes
        return [seen[i] for i in sorted(seen)] or _ddp_buckets(self.trainer.ddp)

    def problem(self):
        p = self.params
        row_bytes = math.prod(self.row_shape) * self.dtype.itemsize
        buckets = self._buckets() if self.trainer else []
        return {
            "bytes": self.global_batch * row_bytes * p.steps,
            "comm": [{"op": "allreduce", "bytes": b, "calls": p.steps, "growth": 0.0} for b in buckets],
        }

    def close(self):
        self.trainer = None
        if self.ring is not None:
            self.ring.end(self.cfg.timeout_s)
            self.ring = None
        if self.joined:
            self.joined = False
            dist.close()


def _ddp_buckets(ddp) -> list[int]:
    """DDP's bucket sizes in bytes from its logging data (when no hook saw them: params.phases false)."""
    try:
        sizes = ddp._get_ddp_logging_data().get("bucket_sizes", "")
        return [int(x) for x in str(sizes).split(",") if x.strip()]
    except Exception:  # a private API: the report then lists no buckets
        return []


def _shape(t) -> str:
    return f"{list(t.shape)} {str(t.dtype).replace('torch.', '')}" if hasattr(t, "shape") else type(t).__name__

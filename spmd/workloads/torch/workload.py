"""Workload ``torch``: the user's own ``torch.nn.Module`` trained data-parallel under spmd's runtime.

One MPI rank per GPU (or CPU rank), torch.distributed joined from MPI (``dist``), the module wrapped in
DistributedDataParallel (``step``). Step k's global batch is the same rows whatever the rank count (the
sampler of the train workload: P logical shards, one permutation stream each, P = the global batch by
default), so N ranks x batch b train exactly like one rank x batch N*b. A repeat is ``params.steps``
optimizer steps. Verified against a one-process reference with DDP's semantics (``reference``).
"""

from __future__ import annotations

import copy
import hashlib
import math
import time

import numpy as np

from ...core import faults
from ...core.cpus import reader_threads
from ...core.errors import ConfigError, InputError, VerificationError
from ...core.files import MARK, discard, publish, require_replaceable, temp_beside
from ...core.memory import free_device_memory, require_memory
from ...core.timing import enter_phase
from ...core.units import fmt_bytes
from ...io.hdf5 import Piece, RankInput, open_h5
from ...io.reader import RowReader
from ..base import Workload, split_batch
from ..training.data import Sampler
from . import dist
from .inputs import check_inputs, check_rows, label_array, read_all, targets, write_targets
from .params import TorchParams
from .reference import GRADIENT_FACTOR, SPREAD_FACTOR, Reference, compare, host_tensors, tolerance
from .step import Batches, Stepper, autocast, set_precision, state_tensors
from .user_model import (
    build_model,
    loss_function,
    parameter_layout,
    require_same_layout,
    require_scalar_loss,
    transform_function,
    user_call,
)

OPTIMIZER_STATES = {"sgd": 1, "adam": 2, "adamw": 2}  # tensors the optimizer keeps per parameter


class TorchWorkload(Workload):
    name = "torch"
    Params = TorchParams
    OUTPUT_FILES = ("save",)
    MAY_SKIP_VERIFY = True

    # -- configuration hooks -----------------------------------------------------------

    @classmethod
    def strong_config(cls, cfg, factor):
        """Strong scaling keeps the global batch: the per-rank batch shrinks by ``factor``."""
        return split_batch(cfg, factor)

    @classmethod
    def weak_config(cls, cfg, factor):
        """Weak scaling keeps the per-rank batch (the global batch grows with the ranks); same data."""
        return cfg

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

    def setup(self, ctx, cfg, comm):
        self.ctx, self.cfg, self.comm, self.params = ctx, cfg, comm, cfg.params
        self.stepper = None
        self.joined = False
        p = self.params
        torch = self.torch = ctx.agree(dist.import_torch)
        ctx.agree(self._check_config)
        if ctx.device == "cpu":
            torch.set_num_threads(ctx.blas_threads or 1)
        set_precision(torch, p.precision)
        self.rows, self.row_shape, self.dtype, self.label_shape = ctx.agree(self._check_inputs)
        self.global_batch = p.batch * p.accumulate * ctx.size
        self.shards = p.data_shards or self.global_batch
        self.sampler = ctx.agree(Sampler, self.rows, self.shards, ctx.size, ctx.rank, self.global_batch, p.seed)
        self.backend = dist.start(ctx, ctx.device, cfg.timeout_s, graph=p.strategy == "ddp-graph")
        self.joined = True
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
        x, y, self.read_seconds = ctx.agree(self._read)
        enter_phase("h2d")
        module = ctx.agree(self._to_device, module)
        self.batches = ctx.agree(self._place, x, y)
        self.start_state = copy.deepcopy(module) if ctx.rank == 0 and self.cfg.verify != "none" else None
        ctx.agree(self._probe, module)
        self.stepper = ctx.agree(Stepper, torch, ctx, p, module, self.loss_fn, self.batches, p.steps)
        if p.strategy == "ddp-graph":
            self.stepper.load_window(self.sampler.window(0, p.steps))
            saved = [t.detach().clone() for t in state_tensors(module)]
            ctx.agree(self.stepper.capture, saved)
        self.windows_run, self.losses, self.reference_seconds = 0, [], None

    def _check_config(self) -> None:
        p, cfg, gpu = self.params, self.cfg, self.ctx.device == "gpu"
        if cfg.input.path is None:
            raise ConfigError("input.shards: the torch workload reads one dataset (input.path)")
        if cfg.verify in ("attrs",):
            raise ConfigError(
                "verify: attrs: the torch workload verifies against a one-process reference (use auto or none)"
            )
        if p.strategy == "ddp-graph" and not gpu:
            raise ConfigError("params.strategy: ddp-graph captures the step in a CUDA graph: it needs device: gpu")
        if p.sync_batchnorm and not gpu:
            raise ConfigError(
                "params.sync_batchnorm: SyncBatchNorm runs on GPUs only (on the CPU, DDP keeps rank 0's "
                "BatchNorm statistics, which the reference reproduces: leave it false)"
            )
        if p.precision == "tf32" and not gpu:
            raise ConfigError("params.precision: tf32 is a GPU mode (use fp32 or bf16 on the CPU)")
        if faults.corrupting() and p.strategy == "ddp-graph":
            raise ConfigError("SPMD_FAULT kind=corrupt changes a gradient in eager code: use strategy ddp or compile")

    def _check_inputs(self):
        return check_inputs(self.cfg)

    def _require_model_memory(self) -> None:
        """Parameters, gradients, DDP's buckets and the optimizer's state must fit on one device: this workload
        is data-parallel (every GPU holds the whole model)."""
        p = self.params
        states = OPTIMIZER_STATES[p.optimizer.name]
        twin = p.phases and p.strategy == "ddp"  # the marked steps' DDP keeps buckets of its own (step.Stepper)
        need = self.gradient_bytes * (3 + states + twin) + (self.gradient_bytes if self.start_state_wanted else 0)
        require_memory(
            need,
            "device",
            self.ctx,
            f"the model's {self.parameters:,} parameters ({fmt_bytes(self.gradient_bytes)}"
            f"), their gradients, DDP's buckets and the {self.params.optimizer.name} state (the torch "
            f"workload is data-parallel: every device holds the whole model)",
        )

    @property
    def start_state_wanted(self) -> bool:
        return self.ctx.rank == 0 and self.cfg.verify != "none"

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
        self._engines = reader.engines()
        faults.poison_rows(x)
        with open_h5(p.labels.path or path) as f:
            y = f[p.labels.dataset][start:stop]
        seconds = time.perf_counter() - t0
        check_rows(self.cfg, x, y, start)
        return x, y, seconds

    def input_engines(self):
        return getattr(self, "_engines", None)

    def _place(self, x, y) -> Batches:
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
        return Batches(torch, tx, ty, placement, self.compute_device, self._param_dtype, self.transform)

    def _to_device(self, module):
        torch = self.torch
        module = module.to(self.compute_device)
        if self.params.sync_batchnorm:
            module = torch.nn.SyncBatchNorm.convert_sync_batchnorm(module)
        self._param_dtype = next(t.dtype for t in module.parameters() if t.is_floating_point())
        module.train()
        return module

    def _probe(self, module) -> None:
        """Forward, loss and backward of this rank's first micro-batch without DDP, state put back: a model that
        cannot take the rows, a loss that is not a scalar, or a batch that does not fit in memory ends the job
        here (exit 2), named, before any rank steps."""
        torch, p = self.torch, self.params
        rows = torch.from_numpy(self.sampler.window(0, 1)[0][: p.batch].astype(np.int64)).to(self.batches.x.device)
        saved = [t.detach().clone() for t in module.buffers()]
        try:
            x, y = self.batches.take(rows)
            what = f"a micro-batch of {p.batch} rows of shape {list(self.row_shape)} {self.dtype}"
            with autocast(torch, p.precision, self.ctx.device == "gpu"):
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
        except torch.cuda.OutOfMemoryError as exc:
            free, total = torch.cuda.mem_get_info()
            raise InputError(
                f"out of GPU memory in the first step at params.batch {p.batch}: "
                f"{str(exc).splitlines()[0][:200]} ({fmt_bytes(free)} of {fmt_bytes(total)} free now): "
                f"use a smaller batch (params.accumulate keeps the global batch)"
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
        self.stepper.load_window(self.sampler.window(self.stepper.step, self.params.steps))

    def run(self, timer):
        enter_phase("compute")
        self.stepper.run_window(self.params.steps, timer)
        self.windows_run += 1

    def _check_losses(self) -> None:
        """The last window's losses finite, or VerificationError naming the step (exit 3)."""
        losses = self.stepper.window_losses(self.params.steps)
        first = self.stepper.step - len(losses)
        bad = np.flatnonzero(~np.isfinite(losses))
        if len(bad):
            raise VerificationError(
                f"the loss is {losses[bad[0]]} at step {first + int(bad[0])}: training diverged "
                f"(lower params.optimizer.lr, or look for a bad input row)"
            )
        self.losses.append(float(np.mean(losses)))

    def progress_note(self, seconds: float) -> str:
        steps = self.params.steps
        loss = f", loss {self.losses[-1]:.4g} (the window before)" if self.losses else ""
        return f"{self.global_batch * steps / seconds:,.0f} samples/s{loss}"

    # -- verification ------------------------------------------------------------------

    def verify(self):
        ctx = self.ctx
        ctx.agree(self._check_losses)
        mine = host_tensors(self.stepper.module)
        # parameters only: a rank's buffers hold its own last forward's update until DDP broadcasts rank 0's
        digest = _digest({name: mine[name] for name, _ in self.stepper.module.named_parameters() if name in mine})
        digests = ctx.comm.allgather(digest)
        differ = [r for r, d in enumerate(digests) if d != digests[0]]
        if differ:
            raise ctx.collective_error(
                VerificationError,
                differ[0],
                f"parameters differ from rank 0's after {self.stepper.step} steps: the replicas diverged",
            )
        outcome = ctx.agree(self._against_reference, mine, root_only=True)
        return {
            "reference": "the same steps in one process (DDP's semantics: each rank's micro-batch, gradients "
            "averaged over ranks, rank 0's buffers), same start and batches",
            "replicas_identical": True,
            "parameters_sha256": digest,
            **outcome,
        }

    def _against_reference(self, run_tensors: dict) -> dict:
        torch, p = self.torch, self.params
        x, y = self._read_all()
        gpu = self.ctx.device == "gpu"
        if gpu:
            need = x.nbytes + y.nbytes
            on_device = need < 0.5 * free_device_memory()
            x, y = (x.to(self.compute_device), y.to(self.compute_device)) if on_device else (x, y)

        def reference(module, reverse: bool):
            ref = Reference(
                torch,
                p,
                module,
                self.loss_fn,
                self.transform,
                x,
                y,
                self.compute_device,
                self._param_dtype,
                self.ctx.size,
                gpu,
                self.stepper.reseed,
            )
            return ref, ref.train(whole.window, 0, self.stepper.step, reverse)

        whole = Sampler(self.rows, self.shards, 1, 0, self.global_batch, p.seed)
        tol = tolerance(p.precision, self.ctx.device)
        # a second reference, its start one rounding away: how far rounding alone carries this training
        reversed_start = _one_ulp_away(torch, copy.deepcopy(self.start_state), p.seed)
        ref, seconds = reference(self.start_state, False)
        expected = host_tensors(ref.module)
        spread = 0.0
        other, more = reference(reversed_start, True)
        seconds += more
        spread, _ = compare(host_tensors(other.module), expected, 0.0, "", elementwise=False)
        param_tol = max(tol, SPREAD_FACTOR * spread)
        error, failure = compare(
            run_tensors, expected, param_tol, "after the last step, parameter or buffer", elementwise=False
        )
        first = {name: t.detach().cpu().double().numpy() for name, t in (self.stepper.first_grads or {}).items()}
        grad_error, grad_failure = compare(
            first, ref.first_grads, GRADIENT_FACTOR * tol, "the first step's gradient of", elementwise=True
        )
        self.reference_seconds = seconds
        if grad_failure or failure:
            hint = (
                ""
                if self.stepper.reseed
                else (
                    " (a forward that draws random numbers itself, not through nn.Dropout, needs params.reseed: true)"
                )
            )
            raise VerificationError(f"after {self.stepper.step} steps: {grad_failure or failure}{hint}")
        return {
            "steps_compared": self.stepper.step,
            "parameter_relative_rms_error": error,
            "first_gradient_relative_error": grad_error,
            "tolerance": tol,
            "gradient_tolerance": GRADIENT_FACTOR * tol,
            "rounding_spread": spread,
            "parameter_tolerance": param_tol,
            "reference_seconds": seconds,
            "buffers": "rank 0's (DDP broadcasts them before every forward)" if list(ref.module.buffers()) else None,
        }

    def _read_all(self):
        """Every row and target (rank 0, for the reference), read again with h5py: independent of the run's path."""
        x, y = read_all(self.cfg, self.ctx, self.rows, self.row_shape, self.dtype)
        return self.torch.from_numpy(x), self.torch.from_numpy(y)

    # -- save, report --------------------------------------------------------------------

    def save(self):
        if self.params.save is None:
            return None
        return self.ctx.agree(self._save, self.params.save.path, root_only=True)

    def _save(self, path: str) -> str:
        """The trained state_dict, by torch.save, its record in the state_dict's metadata (``spmd_record``)."""
        torch = self.torch
        require_replaceable(path, "the save", self.cfg.overwrite)
        state = self.stepper.module.state_dict()
        out = type(state)((k, v.detach().cpu()) for k, v in state.items())
        out._metadata = dict(getattr(state, "_metadata", {}))
        out._metadata["spmd_record"] = {"record": MARK, "steps": self.stepper.step, "model": self.params.model}
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
        p, st = self.params, self.stepper
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
            "phases_marked_every": st.every if p.phases else None,
            "save": p.save.path if p.save else None,
            "libraries": dist.libraries(self.torch, self.ctx.device == "gpu"),
        }

    def _buckets(self) -> list[int]:
        """DDP's gradient buckets in bytes: as the hook saw them, else from DDP's logging data."""
        seen = self.stepper.bucket_bytes
        return [seen[i] for i in sorted(seen)] or _ddp_buckets(self.stepper.ddp)

    def metrics(self, rank_medians):
        p = self.params
        total = max(m["total"] for m in rank_medians)
        phases = ("data", "forward", "backward", "comm_exposed", "comm_overlapped", "optimizer", "step")
        per_step = {
            phase: float(np.median([m.get(phase, 0.0) for m in rank_medians])) / p.steps * 1e3
            for phase in phases
            if any(phase in m for m in rank_medians)
        }
        return {
            "samples_per_s": self.global_batch * p.steps / total,
            "step_ms": total / p.steps * 1e3,
            "phase_ms_per_step": per_step,
        }

    def problem(self):
        p = self.params
        row_bytes = math.prod(self.row_shape) * self.dtype.itemsize
        buckets = self._buckets() if self.stepper else []
        return {
            "bytes": self.global_batch * row_bytes * p.steps,
            "comm": [{"op": "allreduce", "bytes": b, "calls": p.steps, "growth": 0.0} for b in buckets],
        }

    def close(self):
        self.stepper = None
        if self.joined:
            self.joined = False
            dist.close()


def _one_ulp_away(torch, module, seed: int):
    """``module`` with every floating parameter moved one rounding step up or down (seeded random signs): the start
    of a reference that differs from the first by rounding only."""
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for t in module.parameters():
            if t.is_floating_point():
                sign = torch.randint(0, 2, t.shape, generator=generator).to(t.device, t.dtype) * 2 - 1
                t.mul_(1 + sign * torch.finfo(t.dtype).eps)
    return module


def _ddp_buckets(ddp) -> list[int]:
    """DDP's bucket sizes in bytes from its logging data (when no hook saw them: params.phases false)."""
    try:
        sizes = ddp._get_ddp_logging_data().get("bucket_sizes", "")
        return [int(x) for x in str(sizes).split(",") if x.strip()]
    except Exception:  # a private API: the report then lists no buckets
        return []


def _shape(t) -> str:
    return f"{list(t.shape)} {str(t.dtype).replace('torch.', '')}" if hasattr(t, "shape") else type(t).__name__


def _digest(tensors: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        h.update(name.encode())
        h.update(np.ascontiguousarray(tensors[name]).tobytes())
    return h.hexdigest()

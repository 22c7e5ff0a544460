"""Workload ``train``: data-parallel training of an MLP classifier.

Each rank holds its shard of the training set on its device, trains a replica of the
model on its part of every global batch, and the gradients are summed bucket by bucket
over the ranks while backward is still running. A repeat is a window of ``params.steps``
optimizer steps; the run trains (warmup + repeats) x steps steps in all.

Verified at the end: every rank holds bit-identical parameters; one more step's gradient,
reduced over the ranks by the training path, matches a float64 NumPy reference computed on
the host and summed with a plain MPI allreduce; all values finite; the held-out accuracy
reaches ``target_accuracy`` when one is set.
"""

from __future__ import annotations

import numpy as np

from ...core import faults, stops
from ...core.errors import BackendUnavailable, ConfigError, Interrupted, Stopped, VerificationError, brief
from ...core.memory import require_memory
from ...core.stops import StopFlag
from ...core.timing import enter_phase
from ...core.units import fmt_bytes
from ..base import require_one_dataset
from ..training import data as train_data
from ..training.base import TrainingWorkload
from ..training.checks import sum_over_ranks
from .checkpoint import checkpoint_path, load_checkpoint, mark_failed, save_checkpoint
from .gradcheck import check_first_gradient
from .inputs import check_inputs, read_shard
from .layout import Layout
from .ops import make_ops
from .params import CheckpointConfig, TrainParams  # noqa: F401  (CheckpointConfig: part of this module's face)
from .trainer import Trainer
from .verify import verify_train


class TrainWorkload(TrainingWorkload):
    name = "train"
    Params = TrainParams
    OUTPUT_FILES = ("checkpoint",)
    DTYPES = ("float32", "float64")
    AUTO_REPEATS = False  # (warmup + repeats) x steps is the training's length (checkpoints, resume)
    METRIC_PHASES = ("forward", "backward", "comm", "comm_overlapped", "optimizer")

    # -- configuration hooks -----------------------------------------------------------

    @classmethod
    def output_files(cls, cfg) -> list[str]:
        """The checkpoint: the config's, or where a stop signal writes one (in the output folder), checked before
        the run like every output."""
        return [checkpoint_path(cfg)]

    @classmethod
    def input_recipe(cls, cfg) -> dict:
        p = cfg.params
        return {
            "classes": p.widths[-1],
            "teacher_width": p.teacher_width,
            "eval": p.eval,
            "eval_rows": p.eval_rows if p.eval else 0,
            "labels": p.labels,
        }

    @classmethod
    def finish_input(cls, cfg, dataset) -> dict:
        """Labels from the teacher network, and the held-out set."""
        p, g = cfg.params, cfg.generate
        if dataset.ndim != 2 or dataset.shape[1] != p.widths[0]:
            raise ConfigError(
                f"generate.shape: train needs [rows, {p.widths[0]}] (the model's inputs), got {list(dataset.shape)}"
            )
        weights = train_data.teacher(g.seed, p.widths[0], p.teacher_width, p.widths[-1])
        train_data.write_labels(dataset, weights, g.loc, g.scale, name=p.labels)
        if p.eval:
            train_data.write_eval_set(dataset.file.require_group(p.eval), p.eval_rows, weights, g)
        return {}

    # -- set-up ------------------------------------------------------------------------

    def setup(self, ctx, cfg, comm):
        self.ctx, self.cfg, self.comm, self.params = ctx, cfg, comm, cfg.params
        self.trainer = None
        self.checkpoints_written: set[str] = set()
        p = self.params
        self._stop = StopFlag()  # from here on a stop signal is noted, and acted on between windows
        ctx.agree(require_one_dataset, cfg, "train", "a float64 gradient check")
        operand = 2 if p.precision == "bf16" else np.dtype(p.dtype).itemsize  # bytes of the GEMMs' operands
        self.layout = Layout(p.widths, p.backward_order == "inputs_first", operand)
        self.global_batch = p.batch * p.accumulate * ctx.size
        ctx.agree(self._require_batch_memory)
        self.shards = p.data_shards or ctx.size
        self.rows = ctx.agree(check_inputs, self)
        self.sampler = ctx.agree(
            train_data.Sampler, self.rows, self.shards, ctx.size, ctx.rank, self.global_batch, p.seed
        )
        self.host_x, self.host_y, self.eval_x, self.eval_y, self.read_seconds = ctx.agree(read_shard, self)
        self.use_graph = ctx.agree(self._graph_wanted)
        self.trainer = ctx.agree(self._build)
        self.start_step = 0
        if p.resume:
            weights, state, step, failed = ctx.agree(
                load_checkpoint,
                p.resume,
                self.layout,
                self._meta(),
                tuple(self.trainer.optimizer.state),
                p.resume_unverified,
            )
            ctx.agree(self._check_resume_step, step)
            if failed and ctx.rank == 0:
                ctx.warnings.append(
                    f"resumed from {p.resume}, written by a run whose verification failed "
                    f"({brief(failed)}); params.resume_unverified: true"
                )
            self.trainer.set_state(weights, state, step)
            self.start_step = step
        first = self.sampler.window(self.start_step, 1)
        self.trainer.gradient_step(first)
        rows = first[0]
        batches = [
            (self.host_x[rows[j * p.batch : (j + 1) * p.batch]], self.host_y[rows[j * p.batch : (j + 1) * p.batch]])
            for j in range(p.accumulate)
        ]
        self.gradient_check = check_first_gradient(ctx, self.trainer, self.layout, p, batches, self.global_batch)
        self.graph_failure = None
        if self.use_graph:
            self.use_graph, self.graph_failure = self._capture()
        self.windows_run, self.losses, self.accuracies = 0, [], []

    def _require_batch_memory(self) -> None:
        """What grows with the batch, checked before anything is allocated: a batch too large for the machine is
        refused with the numbers (exit 2), not a MemoryError. Host: a window's sample indices (int32, and the
        int64 positions they are drawn from) and the float64 gradient check of one batch; the device (host memory
        on a CPU run): the micro-batch's inputs, activations and their gradients, and the window's indices."""
        p, widths = self.params, self.layout.widths
        item = np.dtype(p.dtype).itemsize
        per_rank = p.batch * p.accumulate
        host = p.steps * per_rank * 36 + per_rank * (widths[0] * item + 24 * sum(widths))
        require_memory(
            host, "host", self.ctx, f"a window's sample indices and the gradient check of {per_rank} samples"
        )
        device = p.batch * ((widths[0] + 2 * sum(widths[1:])) * item + 16) + p.steps * per_rank * 4
        require_memory(device, "device", self.ctx, f"the buffers of a micro-batch of {p.batch} samples")

    def _graph_wanted(self) -> bool:
        graph = self.params.graph
        if graph is True and self.ctx.device != "gpu":
            raise ConfigError("params.graph: CUDA graphs need device: gpu")
        if graph is True and not self.comm.capturable and self.ctx.size > 1:
            raise ConfigError(f"params.graph: a captured step can only hold NCCL calls, not comm: {self.comm.name}")
        return graph is True or (
            graph == "auto" and self.ctx.device == "gpu" and (self.ctx.size == 1 or self.comm.capturable)
        )

    def _build(self) -> Trainer:
        p, xp = self.params, self.ctx.xp
        if self.ctx.device == "gpu":
            enter_phase("h2d")
        need = self.host_x.nbytes + self.host_y.nbytes + 6 * self.layout.size * np.dtype(p.dtype).itemsize
        require_memory(need, "device", self.ctx, f"the shard ({fmt_bytes(self.host_x.nbytes)}) and the model's buffers")
        if p.precision == "bf16" and self.ctx.device != "gpu":
            raise ConfigError("params.precision: bf16 runs on the GPU only (the CPU path computes in params.dtype)")
        ops = make_ops(self.ctx.device, p.dtype, p.gemm_precision, max_rows=p.batch)
        xs, ys = ops.stage(self.host_x), xp.asarray(self.host_y)  # bfloat16 inputs under precision bf16
        return Trainer(self.ctx, self.comm, self.layout, ops, p, xs, ys, p.steps, self.layout.initial(p.seed, p.dtype))

    def _capture(self) -> tuple[bool, str | None]:
        """Capture the step in a CUDA graph on every rank, or on none: (captured, why not)."""
        failure = None
        try:
            self.trainer.capture()
        except Exception as exc:  # a CUDA, cuBLAS or NCCL refusal to be captured
            failure = f"{type(exc).__name__}: {exc}"
            self.trainer.drop_graphs()
        failures = self.ctx.comm.allgather(failure)
        bad = [r for r, f in enumerate(failures) if f]
        if not bad:
            return True, None
        if self.params.graph is True:
            raise self.ctx.collective_error(
                BackendUnavailable, bad[0], f"params.graph: capture failed: {failures[bad[0]]}"
            )
        self.trainer.drop_graphs()  # auto: run the steps eagerly on every rank
        return False, failures[bad[0]]

    def _meta(self) -> dict:
        p = self.params
        return {
            "widths": list(p.widths),
            "dtype": p.dtype,
            "optimizer": p.optimizer,
            "global_batch": self.global_batch,
            "data_shards": self.shards,
            "seed": p.seed,
        }

    def _check_resume_step(self, step: int) -> None:
        total = (self.cfg.warmup + self.cfg.repeats) * self.params.steps
        if step % self.params.steps:
            raise ConfigError(
                f"params.resume: the checkpoint is at step {step}, not at a window boundary of "
                f"params.steps = {self.params.steps}"
            )
        if step >= total:
            raise ConfigError(
                f"params.resume: the checkpoint is at step {step}; this config trains "
                f"{total} steps in all ((warmup + repeats) x steps): nothing is left to do"
            )

    def schedule(self, warmup, repeats):
        if not self.start_step:
            return warmup, repeats
        left = warmup + repeats - self.start_step // self.params.steps
        warm = min(warmup, left - 1)
        return warm, left - warm

    # -- the timed loop ----------------------------------------------------------------

    def prepare(self):
        ctx, p, trainer = self.ctx, self.params, self.trainer
        if self.windows_run:
            self._collect_window()
        mine = "SIGINT" if stops.interrupted() else self._stop.name
        received = ctx.comm.allgather(mine)  # a signal may reach some ranks only
        got = sorted((name != "SIGINT", r) for r, name in enumerate(received) if name)  # Ctrl-C first
        if got:
            rank = got[0][1]
            path = self._checkpoint_path()
            ctx.agree(self._write_checkpoint, path, root_only=True)
            raise ctx.collective_error(
                Interrupted if received[rank] == "SIGINT" else Stopped,
                rank,
                f"{received[rank]} received: checkpoint at step {trainer.step} written "
                f"to {path}; continue with -o params.resume={path}",
            )
        every = p.checkpoint.every if p.checkpoint else 0
        if every and trainer.step > self.start_step and trainer.step % every == 0:
            ctx.agree(self._write_checkpoint, p.checkpoint.path, root_only=True)
        trainer.load_window(self.sampler.window(trainer.step, p.steps))
        if ctx.size == 1:  # no replicas to compare: keep the window's starting state to step again in verify
            w0, s0 = trainer.host_state()  # on a CPU these are the live buffers: copy
            self.window_start = (trainer.step, w0.copy(), {k: v.copy() for k, v in s0.items()})

    def run(self, timer):
        enter_phase("compute")
        self.trainer.run_window(self.params.steps, timer)
        self.windows_run += 1
        if faults.corrupting():
            self.trainer.synchronize()
            faults.corrupt(self.trainer.w, "parameters")

    def _collect_window(self) -> None:
        loss, correct = sum_over_ranks(self.ctx, *self.trainer.take_window_stats())
        samples = self.global_batch * self.params.steps
        self.losses.append(loss / samples)
        self.accuracies.append(correct / samples)

    def _checkpoint_path(self) -> str:
        return checkpoint_path(self.cfg)

    def _write_checkpoint(self, path: str) -> str:
        weights, state = self.trainer.host_state()
        meta = {**self._meta(), "rng": {"kind": "counter-based", "seed": self.params.seed, "step": self.trainer.step}}
        save_checkpoint(path, self.layout, weights, state, self.trainer.step, meta, self.cfg.overwrite)
        self.checkpoints_written.add(path)
        return path

    # -- verification ------------------------------------------------------------------

    def verify(self):
        self._collect_window()
        try:
            verification, self.eval_loss, self.eval_accuracy = verify_train(self)
            return verification
        except VerificationError as exc:
            if exc.collective:  # every rank is here: the run's checkpoints must not resume silently
                reason = str(exc)
                self.ctx.agree(
                    lambda: [mark_failed(path, reason) for path in sorted(self.checkpoints_written)], root_only=True
                )
            raise

    def save(self):
        if not self.params.checkpoint:
            return None
        return self.ctx.agree(self._write_checkpoint, self.params.checkpoint.path, root_only=True)

    # -- report ------------------------------------------------------------------------

    def result(self):
        p = self.params
        return {
            "model": list(p.widths),
            "parameters": self.layout.parameters,
            "dtype": p.dtype,
            "optimizer": p.optimizer,
            "batch_per_rank": p.batch,
            "accumulate": p.accumulate,
            "global_batch": self.global_batch,
            "steps": self.trainer.step,
            "resumed_from_step": self.start_step,
            "steps_per_repeat": p.steps,
            "data_shards": self.shards,
            "buckets": [b.size * np.dtype(p.dtype).itemsize for b in self.trainer.buckets],
            "overlap": p.overlap and self.ctx.size > 1,
            "graph": self.use_graph,
            "update_in_backward": self.trainer.update_in_backward,
            "graph_failure": self.graph_failure,
            "tf32": p.gemm_precision == "tf32",
            "precision": p.gemm_precision or p.dtype,
            "loss_per_window": self.losses,
            "train_accuracy_per_window": self.accuracies,
            "eval_loss": self.eval_loss,
            "eval_accuracy": self.eval_accuracy,
            "read_seconds": self.read_seconds,
            "step_timeline_us": self.trainer.step_timeline(),
            "backward_order": p.backward_order,
            "nccl_graph_mixing_support": getattr(self.comm, "graph_mixing", None),
            "l2_window": self.trainer.l2.describe() if self.trainer.l2 is not None else None,
            "checkpoint": p.checkpoint.path if p.checkpoint else None,
        }

    def metrics(self, rank_medians):
        """Every phase of a marked step, 0 where a run has none (comm_overlapped on a CPU); none unmarked."""
        out = super().metrics(rank_medians)
        marked = out["phase_ms_per_step"]
        out["phase_ms_per_step"] = {p: marked.get(p, 0.0) for p in self.METRIC_PHASES} if self.params.phases else {}
        return out

    def problem(self):
        p = self.params
        itemsize = np.dtype(p.dtype).itemsize
        return {
            "bytes": self.global_batch * p.widths[0] * itemsize * p.steps,
            "comm": [
                {"op": "allreduce", "bytes": b.size * itemsize, "calls": p.steps, "growth": 0.0}
                for b in self.trainer.buckets
            ],
        }

    def close(self):
        self._stop.restore()
        if self.trainer is not None:
            self.trainer.close()

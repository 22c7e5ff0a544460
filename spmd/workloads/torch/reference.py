"""The one-process reference: the run's training again on rank 0, without DDP, for verification.

Same start (rank 0's parameters and buffers before the first step), same optimizer, same global batches in
the same micro-batches, and DDP's semantics exactly: each rank's micro-batch is a forward and backward of its
own (``loss / accumulate``), the gradients summed and divided by the rank count; every forward starts from
rank 0's buffers (DDP broadcasts them before each forward), and only rank 0's forward changes them; dropout's
masks come from the same per-micro-batch seeds. Under ``sync_batchnorm`` the ranks' micro-batches of a step
are one batch (SyncBatchNorm's statistics are over all of them).
"""

from __future__ import annotations

import contextlib
import functools
import time

import numpy as np

from .compute import autocast, deterministic, make_optimizer, micro_seed, model_input, state_tensors


class Reference:
    """Trains ``module`` (a copy of rank 0's at the start) for ``steps`` steps from step ``first``.

    Args:
        x, y: every row of the input and its targets (torch tensors; on the device when they fit).
        window: the one-rank sampler's ``window`` (global row numbers of each step's global batch, in the
            order the ranks hold them).
        deterministic_steps: the first steps the run took with deterministic kernels (``Trainer``): so does this.
    """

    def __init__(
        self,
        torch,
        params,
        module,
        loss_fn,
        transform,
        x,
        y,
        compute_device,
        input_dtype,
        ranks: int,
        gpu: bool,
        reseed: bool,
        deterministic_steps: int = 0,
    ):
        # one process: a SyncBatchNorm here would wait in a collective no other rank enters
        module = without_sync_batchnorm(torch, module) if params.sync_batchnorm else module
        self.torch, self.params, self.module, self.loss_fn = torch, params, module, loss_fn
        self.transform, self.x, self.y, self.device = transform, x, y, compute_device
        self.input_dtype, self.ranks, self.gpu = input_dtype, ranks, gpu
        self.reseed = reseed
        self.deterministic_steps = deterministic_steps
        # ddp-graph's capturable Adam rounds its bias correction on the device: the reference does the same
        self.optimizer = make_optimizer(
            torch, params.optimizer, module.parameters(), capturable=params.strategy == "ddp-graph"
        )
        self.first_grads: dict | None = None

    def _micro(self, rows: np.ndarray):
        torch = self.torch
        index = torch.from_numpy(rows).to(self.x.device)
        x, y = self.x.index_select(0, index), self.y.index_select(0, index)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        return model_input(x, self.input_dtype, self.transform), y

    def train(self, window, first: int, steps: int, reverse: bool = False) -> float:
        """Steps ``first`` ... ``first + steps - 1``; returns the seconds they took. ``reverse``: the ranks'
        micro-batches in the other order (rank 0 still last) and their gradients divided by the rank count after
        the sum, not before: another rounding of the same training."""
        torch, p = self.torch, self.params
        n = self.ranks
        t0 = time.perf_counter()
        every = window(first, steps)  # all steps' rows at once: the sampler's work is per shard, not per step
        for step in range(first, first + steps):
            rows = every[step - first]
            self.optimizer.zero_grad(set_to_none=True)
            with deterministic(torch, self.gpu) if step < self.deterministic_steps else contextlib.nullcontext():
                self._step_gradients(rows, step, reverse)
            if reverse and not p.sync_batchnorm:
                with torch.no_grad():
                    for t in self.module.parameters():
                        if t.grad is not None:
                            t.grad.div_(n)
            if step == 0:
                self.first_grads = host_tensors(self.module, grads=True)
            self.optimizer.step()
        if self.gpu:
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    def _step_gradients(self, rows, step: int, reverse: bool) -> None:
        """A step's gradients summed over its ranks' micro-batches (divided by the rank count unless ``reverse``)."""
        torch, p = self.torch, self.params
        k, b, n = p.accumulate, p.batch, self.ranks
        per_rank = k * b
        buffers = list(self.module.buffers())
        for j in range(k):
            if p.sync_batchnorm:
                order = range(n - 1, -1, -1) if reverse else range(n)
                part = np.concatenate([rows[r * per_rank + j * b : r * per_rank + (j + 1) * b] for r in order])
                self._backward(part, k, step, 0, j)
                continue
            start = [t.detach().clone() for t in buffers]
            others = list(range(1, n))
            for r in [*(others[::-1] if reverse else others), 0]:  # rank 0 last: DDP keeps its buffers
                with torch.no_grad():
                    for t, v in zip(buffers, start):
                        t.copy_(v)
                self._backward(
                    rows[r * per_rank + j * b : r * per_rank + (j + 1) * b], k * (1 if reverse else n), step, r, j
                )

    def _backward(self, rows, divide: int, step: int, rank: int, micro: int) -> None:
        torch = self.torch
        x, y = self._micro(rows)
        if self.reseed:
            torch.manual_seed(micro_seed(self.params.seed, step, rank, micro))
        with autocast(torch, self.params.precision, self.gpu):
            loss = self.loss_fn(self.module(x), y)
        (loss / divide if divide > 1 else loss).backward()


def without_sync_batchnorm(torch, module):
    """``module`` with each SyncBatchNorm swapped (in place) for a batch norm holding the same parameters and buffers
    that synchronises nothing: the reference's batch is every rank's micro-batch at once, so its statistics are the
    ones SyncBatchNorm gathers (``convert_sync_batchnorm`` undone)."""
    if isinstance(module, torch.nn.SyncBatchNorm):
        plain = _any_rank_batchnorm(torch)(
            module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats
        )
        if module.affine:
            plain.weight, plain.bias = module.weight, module.bias
        plain.running_mean, plain.running_var = module.running_mean, module.running_var
        plain.num_batches_tracked = module.num_batches_tracked
        plain.train(module.training)
        return plain
    for name, child in module.named_children():
        module.add_module(name, without_sync_batchnorm(torch, child))
    return module


@functools.cache
def _any_rank_batchnorm(torch):
    class BatchNorm(torch.nn.modules.batchnorm._BatchNorm):
        """Batch norm over inputs of any rank, as SyncBatchNorm takes them (BatchNorm1d/2d/3d each check theirs)."""

        def _check_input_dim(self, input):
            if input.dim() < 2:
                raise ValueError(f"expected at least 2-D input (got {input.dim()}-D input)")

    return BatchNorm


def host_tensors(module, grads: bool = False) -> dict:
    """name -> float64 NumPy copy of every parameter and buffer (or of every parameter's gradient)."""
    if grads:
        items = [(n, p.grad) for n, p in module.named_parameters() if p.grad is not None]
    else:
        items = [*module.named_parameters(), *module.named_buffers()]
    return {name: t.detach().to("cpu", copy=True).double().numpy() for name, t in items if t.is_floating_point()}


__all__ = ["Reference", "host_tensors", "state_tensors", "without_sync_batchnorm"]

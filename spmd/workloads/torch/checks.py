"""The checks verification makes at a checked step (``schedule``), while the run takes it: every rank's own gradient
before the allreduce, recomputed by the next rank in a ring, and the optimizer's update of the parameters.

**Gradients, in a ring.** Rank r-1 hands rank r its gradient as it entered the allreduce (DDP's buckets, flattened
by parameter); rank r reads rank r-1's rows of the step from the file itself and computes their gradient from the
step's starting parameters and rank 0's buffers (as DDP broadcasts them before each forward), with deterministic
kernels on both sides. Every rank does the same work, so the cost does not grow with the rank count and no device
checks its own gradient, except at one rank, where the one device recomputes its own (the report says so).
Elements are compared one by one, relative to |element| + the tensor's rms: within FLOOR (a few float32 roundings)
where the kernels are the same deterministic ones on devices of the same kind (the assumption, stated in the
report); where they differ by more, a second recomputation measures what the kernels themselves vary by, and the
bound is BOUND_FACTOR times that.

**The update.** The optimizer's step is taken again from the run's own state at the step (its parameters, the
averaged gradient and the optimizer's state), on a copy, and the run's parameters after the step must be that
update: no drift across steps, so bf16 training is checked as fp32 is.

A change found ends the job at that step (VerificationError, exit 3), naming the step, the rank and the tensor.
"""

from __future__ import annotations

import copy
import threading
import time

import numpy as np

from ...core.errors import VerificationError
from ...io.hdf5 import open_h5
from .compute import autocast, deterministic, make_optimizer, micro_seed, model_input
from .dist import group
from .gradients import BOUND_FACTOR, CAUGHT, FLOOR, QUANTILES
from .inputs import label_array, labels_path
from .step import unfinished_reduction

SAMPLE = 1 << 16  # elements sampled for what the bound catches (the quantiles and the share caught at 1%)


class StepChecks:
    """One rank's side of the checks (``Trainer`` calls ``begin``, ``before_update`` and ``end`` around a checked
    step). ``results``: a summary per checked step."""

    def __init__(self, w, module, ranks_checked: bool, ring: RingConnection | None = None):
        self.torch = w.torch
        self.w, self.ctx, self.p = w, w.ctx, w.params
        self.module = module
        began = time.perf_counter()
        if ring is not None:
            ring.wait()
        self.ranks_checked = ranks_checked  # each rank's own gradient (not under SyncBatchNorm)
        self.gpu = w.ctx.device == "gpu"
        self.layout = [(n, t.numel()) for n, t in module.named_parameters() if t.requires_grad]
        self.size = sum(n for _, n in self.layout)
        # the recomputation's own copy of the model: the user's hooks on parameters are not copied with it
        self.checker = copy.deepcopy(module) if ranks_checked else None
        self.whole = w.one_rank_sampler() if ranks_checked else None
        self.buffers: list[list] = []
        self.results: list[dict] = []
        self.seconds = 0.0
        self.parts: dict[str, float] = {}  # seconds by part, over the checks (the device drained at each lap)
        self._lapped = 0.0
        self._hook = None
        self._start = self._state = self._grads = None
        # the checker's copy of the model, the sampler and any wait for the ring's connection
        self.setup_seconds = time.perf_counter() - began

    # -- around the run's step ---------------------------------------------------------

    def begin(self, optimizer) -> None:
        """Before the step: its starting parameters and optimizer state, and rank 0's buffers before each
        micro-batch's forward (DDP broadcasts them first: a pre-hook on the inner module sees them after)."""
        self._lap()
        self._start = [t.detach().clone() for t in self.module.parameters()]
        self._state = [  # the optimizer's state of each parameter, copied on its device
            _state_copy(self.torch, optimizer.state[t]) if t in optimizer.state else None
            for t in self.module.parameters()
        ]
        self._lap("copies before the step")
        self.buffers = []
        if list(self.module.buffers()):
            self._hook = self.module.register_forward_pre_hook(
                lambda m, args: self.buffers.append([b.detach().clone() for b in m.buffers()])
            )

    def before_update(self) -> None:
        """After the allreduce, before the optimizer: the averaged gradient the update is taken from."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self._grads = [t.grad.detach().clone() if t.grad is not None else None for t in self.module.parameters()]

    def end(self, step: int, copies: dict, optimizer) -> None:
        """After the optimizer's step: both checks, agreed by every rank (collective); VerificationError on all
        ranks when one finds a change."""
        ctx = self.ctx
        t0 = time.perf_counter()
        self._lap("the step itself")
        result = {"step": step}
        if self.ranks_checked:
            ctx.agree(self._require_reduced, step, copies)  # before any rank sends: none is left waiting
            result.update(ctx.agree(self._ring, step, copies))
        result["update"] = ctx.agree(self._update, step, optimizer)
        self._start = self._state = self._grads = None
        self.buffers = []
        failures = ctx.comm.allgather(result.pop("failure", None) or result["update"].pop("failure", None))
        failure = next((f for f in failures if f), None)
        if failure:
            raise ctx.collective_error(VerificationError, failure[0], failure[1])
        self._lap("agreeing")
        result["seconds"] = time.perf_counter() - t0  # this check's, after its step
        self.results.append(result)
        self.seconds += result["seconds"]

    def _lap(self, part: str | None = None) -> None:
        """The seconds since the last lap added to ``part`` (the device drained first); None starts a lap."""
        if self.gpu:
            self.torch.cuda.synchronize()
        now = time.perf_counter()
        if part is not None:
            self.parts[part] = self.parts.get(part, 0.0) + now - self._lapped
        self._lapped = now

    # -- every rank's gradient, in a ring ------------------------------------------------

    def _ring(self, step: int, copies: dict) -> dict:
        torch, ctx = self.torch, self.ctx
        mine = self._flat(copies)
        source = (ctx.rank - 1) % ctx.size
        theirs = _exchange(torch, mine, ctx.rank, ctx.size)
        self._lap("the gradient to the next rank")
        expected = self._recompute(step, source)
        self._lap("recomputing")
        first = not self.results  # what the bound catches, measured at this rank's first check
        summary, failure = judge(torch, theirs, expected, None, self.layout, first)
        self._lap("comparing")
        second = None
        if failure:  # beyond a few roundings: what the kernels themselves vary by, from a second recomputation
            second = self._recompute(step, source)
            summary, failure = judge(torch, theirs, expected, second, self.layout, True)
        out = {"rank": source, "by": ctx.rank, "recomputed_twice": second is not None, **summary}
        if failure:
            where = "its own device, the only one" if ctx.size == 1 else f"rank {ctx.rank}"
            out["failure"] = (
                source,
                f"step {step}: rank {source}'s {failure} (the gradient rank {source} handed to the allreduce, "
                f"against its rows' gradient recomputed on {where}): rank {source} computed a gradient its "
                f"micro-batches do not give (before the allreduce)",
            )
        return out

    def _require_reduced(self, step: int, copies: dict) -> None:
        """Every parameter's gradient handed to the allreduce, or DDP's reduction did not finish (a loss that reached
        none of some parameters DDP waited for): that, not a wrong gradient, is what the step went wrong by."""
        handed = {name for _, (_, names) in copies.items() for name, _ in names}
        if any(name not in handed for name, _ in self.layout):
            raise unfinished_reduction(step)

    def _flat(self, copies: dict):
        """This rank's gradient as it entered the allreduce, float32 in the model's parameter order (DDP's buckets
        hold them in an order of their own; a parameter no loss reached is zero, as in its bucket)."""
        pieces = {}
        for _, (flat, names) in sorted(copies.items()):
            offset = 0
            for name, size in names:
                pieces[name] = flat[offset : offset + size]
                offset += size
        return self._flatten(pieces)

    def _flatten(self, by_name: dict):
        """Tensors by parameter name as one float32 vector in ``layout``'s order (zeros where one is missing), in
        one copy."""
        torch, device = self.torch, self.w.compute_device
        pieces = [
            by_name[name].reshape(-1).float()
            if by_name.get(name) is not None
            else torch.zeros(size, dtype=torch.float32, device=device)
            for name, size in self.layout
        ]
        return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.float32, device=device)

    def _recompute(self, step: int, rank: int):
        """Rank ``rank``'s gradient of step ``step``: its micro-batches read from the file, from the step's
        starting parameters and rank 0's buffers before each micro-batch (float32, the model's parameter order)."""
        torch, p, w = self.torch, self.p, self.w
        k, b = p.accumulate, p.batch
        per_rank = k * b
        rows = self.whole.window(step, 1)[0][rank * per_rank : (rank + 1) * per_rank]
        x, y = self._read(rows)
        self._lap("reading the rows")
        module = self.checker
        with torch.no_grad():
            torch._foreach_copy_(list(module.parameters()), self._start)
        module.zero_grad(set_to_none=True)
        buffers = list(module.buffers())
        with deterministic(torch, self.gpu):
            for j in range(k):
                if self.buffers:
                    with torch.no_grad():
                        for t, v in zip(buffers, self.buffers[j]):
                            t.copy_(v)
                if w.trainer.reseed:
                    torch.manual_seed(micro_seed(p.seed, step, rank, j))
                xj = model_input(x[j * b : (j + 1) * b], w.param_dtype, w.transform)
                with autocast(torch, p.precision, self.gpu):
                    loss = w.loss_fn(module(xj), y[j * b : (j + 1) * b])
                (loss / k if k > 1 else loss).backward()
        out = self._flatten({name: t.grad for name, t in module.named_parameters()})
        module.zero_grad(set_to_none=True)
        return out

    def _read(self, rows: np.ndarray):
        """Rows ``rows`` (global row numbers, in order) and their targets, read from the files with h5py, each run of
        consecutive rows in one read: the run's own read path never enters the check."""
        torch, w = self.torch, self.w
        order = np.unique(rows)
        where = np.searchsorted(order, rows)
        with open_h5(w.cfg.input.path) as f:
            x = _rows(f[w.cfg.input.dataset], order)[where]
        with open_h5(labels_path(w.cfg)) as f:
            y = _rows(f[self.p.labels.dataset], order)[where]
        y = label_array(y, self.p.loss)
        return torch.from_numpy(x).to(w.compute_device), torch.from_numpy(y).to(w.compute_device)

    # -- the optimizer's update --------------------------------------------------------

    def _update(self, step: int, optimizer) -> dict:
        """The optimizer's step again on copies of the step's start, gradient and state; the run's parameters after
        the step must equal it within FLOOR of |element| + the tensor's rms. Where they do not, the step is taken
        again once more from the same copies: a second that agrees with the run tells the first recomputation moved
        (the check's own, recorded in ``first_recomputation_difference``), not the run; a second that does not is the
        failure, with what each input held at the element."""
        first = self._step_again()
        self._lap("the update again")
        worst, beyond = self._beyond_floor(first)
        out = {"largest_difference": worst, "failure": None}
        if beyond is not None:
            second = self._step_again()
            again, beyond_again = self._beyond_floor(second)
            out = {"largest_difference": again, "failure": None, "recomputed_twice": True}
            if beyond_again is None:
                out["first_recomputation_difference"] = worst
            else:
                out["failure"] = (self.ctx.rank, self._described(step, beyond_again, first, second))
        self._lap("comparing the parameters")
        return out

    def _step_again(self) -> list:
        """The optimizer's step taken again on fresh copies of the step's start and state with the averaged gradient
        copied after the allreduce (the copies themselves kept for another): the parameters it gives."""
        torch = self.torch
        shadow = [
            torch.nn.Parameter(t.clone(), requires_grad=live.requires_grad)
            for t, live in zip(self._start, self.module.parameters())
        ]
        for t, g in zip(shadow, self._grads):
            t.grad = g  # the optimizers read .grad and leave it as is
        again = make_optimizer(torch, self.p.optimizer, shadow)
        for t, state in zip(shadow, self._state):
            if state is not None:
                again.state[t] = _state_copy(torch, state)
        again.step()
        return [t.detach() for t in shadow]

    def _beyond_floor(self, expected: list) -> tuple[float, tuple | None]:
        """The largest difference of the run's parameters from ``expected`` (relative to |element| + the tensor's
        rms), and the first tensor's worst element beyond FLOOR as (the parameter's index, its name, element index, its
        error, how many of the tensor's elements are beyond), or None."""
        torch = self.torch
        worst, beyond = 0.0, None
        live = [t.detach() for t in self.module.parameters()]
        if _all_equal(torch, live, expected):
            return worst, beyond
        for k, ((name, _), run, ref) in enumerate(zip(self.module.named_parameters(), live, expected)):
            if torch.equal(run, ref):
                continue
            ref = ref.double()
            scale = ref.abs() + ref.pow(2).mean().sqrt() + np.finfo(np.float64).tiny
            err = relative_error(run.double(), ref, scale).reshape(-1)
            i = int(err.argmax())
            worst = max(worst, float(err[i]))
            if float(err[i]) > FLOOR and beyond is None:
                beyond = (k, name, i, float(err[i]), int((err > FLOOR).sum()))
        return worst, beyond

    def _described(self, step: int, beyond: tuple, first: list, second: list) -> str:
        """The update check's failure: the element, and what each input and both recomputations held there."""
        k, name, i, err, count = beyond
        live = list(self.module.parameters())[k]

        def at(t) -> str:
            return repr(float(t.reshape(-1)[i])) if t is not None else "none"

        return (
            f"step {step}: parameter {name} element {i} is {at(live.detach())} after the step, {at(second[k])} from "
            f"the optimizer's update of the step's averaged gradient ({err / FLOOR:.3g}x the bound; {count} of the "
            f"tensor's {live.numel()} elements beyond it): the parameters changed otherwise. There the step started "
            f"from {at(self._start[k])} with the gradient {at(self._grads[k])} copied after the allreduce "
            f"({at(live.grad)} on the parameter now); the update taken twice gave {at(first[k])} and {at(second[k])}"
            f"; {self._gradients_since()}"
        )

    def _gradients_since(self) -> str:
        """Whether the gradients on the parameters after the step are still those copied after the allreduce."""
        live = [t.grad for t in self.module.parameters()]
        if [g is None for g in live] == [g is None for g in self._grads] and _all_equal(
            self.torch, [g.detach() for g in live if g is not None], [g for g in self._grads if g is not None]
        ):
            return "the gradients on the parameters are still those copied after the allreduce"
        return "the gradients on the parameters are no longer those copied after the allreduce (changed since)"


def _state_copy(torch, state: dict) -> dict:
    """A copy of one parameter's optimizer state: its tensors cloned on their device, the rest copied."""
    return {k: v.clone() if torch.is_tensor(v) else copy.copy(v) for k, v in state.items()}


def _all_equal(torch, run: list, expected: list) -> bool:
    """Whether two lists of tensors hold the same values, element for element: one flat copy of each per dtype,
    compared on the device with one wait (a comparison per tensor waits for the device each time)."""
    groups: dict = {}
    for a, b in zip(run, expected):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        pair = groups.setdefault(a.dtype, ([], []))
        pair[0].append(a.reshape(-1))
        pair[1].append(b.reshape(-1))
    return all(torch.equal(torch.cat(a), torch.cat(b)) for a, b in groups.values())


def _rows(dataset, order: np.ndarray) -> np.ndarray:
    """Rows ``order`` (sorted, unique) of an h5py dataset: one read per run of consecutive rows (h5py's fancy
    indexing selects row by row, slower on a batch of images; one read of a file selection holding every run was
    slower still on a chunked dataset)."""
    out = np.empty((len(order), *dataset.shape[1:]), dtype=dataset.dtype)
    breaks = np.flatnonzero(np.diff(order) != 1) + 1
    for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, len(order)]):
        dataset.read_direct(out, np.s_[int(order[lo]) : int(order[hi - 1]) + 1], np.s_[lo:hi])
    return out


class RingConnection:
    """The ring's first exchange, made in a thread while set-up builds the model and reads the rows. NCCL connects a
    pair of ranks at their first point-to-point exchange, a fixed cost the first checked step would otherwise wait
    for; a one-element exchange pays it early. Started on every rank right after joining, before any user code, so
    every rank's exchange finds its peers'. ``wait`` re-raises what the thread met."""

    def __init__(self, torch, rank: int, size: int, device: int):
        self.error: BaseException | None = None
        self.thread = threading.Thread(
            target=self._connect, args=(torch, rank, size, device), name="spmd-ring-connection", daemon=True
        )
        self.thread.start()

    def _connect(self, torch, rank: int, size: int, device: int) -> None:
        try:
            torch.cuda.set_device(device)  # the current device is the thread's own
            _exchange(torch, torch.zeros(1, device="cuda"), rank, size)
            torch.cuda.synchronize()
        except BaseException as exc:  # handed to the main thread by wait()
            self.error = exc

    def wait(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error

    def end(self, timeout: float) -> None:
        """A set-up that failed before waiting: the exchange finished before the group is destroyed (its error, if
        any, is not the job's)."""
        self.thread.join(timeout)


def _exchange(torch, mine, rank: int, size: int):
    """Rank r's tensor to rank r+1, rank r-1's to rank r (torch.distributed's point-to-point, NCCL or gloo)."""
    if size == 1:
        return mine
    import torch.distributed as dist

    theirs = torch.empty_like(mine)
    # the job's group holds the launch's first ranks: its ranks are theirs (dist.sweep_groups)
    ops = [
        dist.P2POp(dist.isend, mine, (rank + 1) % size, group=group()),
        dist.P2POp(dist.irecv, theirs, (rank - 1) % size, group=group()),
    ]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return theirs


def _per_tensor(torch, flat, lengths: list[int], reduce, dtype=None):
    """``reduce`` (torch.mean, torch.max) of each tensor's slice of ``flat``, as one device tensor of ``dtype``
    (``flat``'s when None; 0 for an empty slice). A slice per tensor: every reduction runs over the whole device,
    where torch.segment_reduce gives a segment of millions of elements to few threads."""
    dtype = dtype or flat.dtype
    out, offset = [], 0
    for n in lengths:
        out.append(reduce(flat[offset : offset + n]) if n else flat.new_zeros((), dtype=dtype))
        offset += n
    return torch.stack(out) if out else flat.new_zeros(0, dtype=dtype)


def relative_error(got, ref, scale):
    """|got - ref| / scale, element by element: 0 where both are the same value or both NaN (a training gone
    non-finite is the loss check's to name), infinite where only one is not finite."""
    err = ((got - ref).abs() / scale).nan_to_num(nan=np.inf, posinf=np.inf)
    same = (got == ref) | (got.isnan() & ref.isnan())
    return err.masked_fill(same, 0.0)


def judge(torch, run, expected, second, layout, sensitivity: bool = True) -> tuple[dict, str | None]:
    """``run`` against ``expected`` (flat, in ``layout``'s order), element by element, relative to |element| + the
    tensor's rms: within FLOOR, or where ``second`` (the recomputation again) differs from ``expected``,
    BOUND_FACTOR x that difference. A summary (with ``sensitivity``, what the bound catches: ``_sensitivity``) and
    the first element beyond its bound described (None if none). Where the two agree bit for bit (deterministic
    kernels on both sides), one comparison and one wait for the device; otherwise the whole model at once, a
    reduction per tensor."""
    lengths = [n for _, n in layout]
    zero = {"largest_error_in_bounds": 0.0, "largest_difference": 0.0, "measured_rounding": 0.0}
    if second is None and torch.equal(run, expected):
        caught = _sensitivity(torch, expected, lengths, np.full(len(lengths), FLOOR)) if sensitivity else {}
        return {**zero, "smallest_change_caught": None, "share_caught_at_1_percent": None, **caught}, None
    sizes = torch.tensor(lengths, dtype=torch.int64, device=run.device)
    total = run.numel()
    ref, got = expected.double(), run.double()
    rms = _per_tensor(torch, ref * ref, lengths, torch.mean).sqrt()
    scale = ref.abs() + rms.repeat_interleave(sizes, output_size=total) + np.finfo(np.float64).tiny
    if second is not None:
        noise = _per_tensor(torch, (second.double() - ref).abs() / scale, lengths, torch.max)
    else:
        noise = torch.zeros_like(rms)
    level = torch.where(noise > 0, BOUND_FACTOR * noise, torch.full_like(noise, FLOOR))
    err = relative_error(got, ref, scale)
    top = _per_tensor(torch, err, lengths, torch.max)
    top, level, noise = top.cpu().numpy(), level.cpu().numpy(), noise.cpu().numpy()
    excess = top / level
    failure = None
    bad = np.flatnonzero(excess > 1)
    if bad.size:  # the first tensor beyond its bound, described element by element
        k = int(bad[0])
        name, size = layout[k]
        start = sum(n for _, n in layout[:k])
        part = err[start : start + size]
        i = int(part.argmax())
        failure = (
            f"gradient of {name} element {i}: {float(got[start + i])!r} in the run, {float(ref[start + i])!r} "
            f"recomputed, {float(excess[k]):.3g}x the bound ({int((part > float(level[k])).sum())} of {size} "
            f"elements beyond it)"
        )
    summary = {
        "largest_error_in_bounds": float(excess.max()) if excess.size else 0.0,
        "largest_difference": float(top.max()) if top.size else 0.0,
        "measured_rounding": float(noise.max()) if noise.size else 0.0,
        "smallest_change_caught": None,
        "share_caught_at_1_percent": None,
        **(_sensitivity(torch, expected, lengths, level) if sensitivity else {}),
    }
    return summary, failure


def _sensitivity(torch, expected, lengths: list[int], level: np.ndarray) -> dict:
    """What the bound catches, on SAMPLE elements spread evenly over the model: for each non-zero one, the smallest
    relative change of it alone beyond its tensor's bound ``level`` (quantiles), and the share caught at 1%. Each
    tensor's rms is its own, whole."""
    total = int(sum(lengths))
    if not total:
        return {"smallest_change_caught": None, "share_caught_at_1_percent": None}
    rms = (
        _per_tensor(torch, expected, lengths, lambda t: t.double().square().mean(), torch.float64).sqrt().cpu().numpy()
    )
    where = np.arange(0, total, max(1, total // SAMPLE))
    tensor = np.searchsorted(np.cumsum(lengths), where, side="right")  # the tensor each sampled element is in
    ref = expected[torch.from_numpy(where).to(expected.device)].double().cpu().numpy()
    nonzero = ref != 0
    scale = np.abs(ref) + rms[tensor] + np.finfo(np.float64).tiny
    smallest = (level[tensor] * scale)[nonzero] / np.abs(ref[nonzero])
    if not smallest.size:
        return {"smallest_change_caught": None, "share_caught_at_1_percent": None}
    return {
        "smallest_change_caught": {f"q{int(q * 100)}": float(np.quantile(smallest, q)) for q in QUANTILES},
        "share_caught_at_1_percent": float(np.mean(smallest <= CAUGHT)),
    }


__all__ = ["RingConnection", "StepChecks", "judge"]

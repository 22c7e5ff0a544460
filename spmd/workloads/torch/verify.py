"""What verifies a torch run: the replicas identical, every rank's own gradient at the first steps (``gradients``)
and the parameters after the last step against the one-process reference (``reference``).

The parameters are compared by each tensor's relative RMS error, within SPREAD_FACTOR times the difference
between two references, the second started one rounding step away and dividing the ranks' gradients after their
sum: what rounding alone does to this training (a model with ties or max-pooling, Adam on near-zero gradients,
BLAS results that depend on memory alignment turn rounding into differences that grow step by step). Where that
spread is beyond MAX_SPREAD, rounding alone carries the training too far for the comparison to tell anything:
the parameters are reported not checked.
"""

from __future__ import annotations

import copy

import numpy as np

from ...core.errors import VerificationError
from ...core.memory import free_device_memory
from ..training.checks import digest, require_identical_replicas
from ..training.data import Sampler
from .gradients import BOUND_FACTOR, FLOOR, check_ranks, gather_local_gradients, judge
from .inputs import read_all
from .reference import Reference, host_tensors

SPREAD_FACTOR = 10  # the parameters may differ from the reference by 10x what two roundings of it differ by
MAX_SPREAD = 1e-3  # beyond it the two references differ by more than 0.1%: the parameters are not checked
DETERMINISTIC = "deterministic (PyTorch's deterministic algorithms, cuDNN's, SDPA's math backend)"


def verify_torch(w) -> dict:
    """The run of TorchWorkload ``w`` verified on every rank (collective): replicas, every rank's checked gradients
    to rank 0, then rank 0 against the reference; report.json's ``verification``."""
    ctx = w.ctx
    mine = host_tensors(w.stepper.module)
    # parameters only: a rank's buffers hold its own last forward's update until DDP broadcasts rank 0's
    named = {name: mine[name] for name, _ in w.stepper.module.named_parameters() if name in mine}
    sha = digest(named)
    require_identical_replicas(ctx, sha, w.stepper.step)
    gathered = ctx.agree(gather_local_gradients, ctx, w.stepper)
    outcome = ctx.agree(against_reference, w, mine, gathered, root_only=True)
    return {
        "reference": "the same steps in one process (DDP's semantics: each rank's micro-batch, gradients "
        "averaged over ranks, rank 0's buffers), same start and batches",
        "replicas_identical": True,
        "parameters_sha256": sha,
        **outcome,
    }


def against_reference(w, run_tensors: dict, gathered: dict | None) -> dict:
    """Rank 0: every rank's checked gradients (or, under ddp-graph and SyncBatchNorm, the first step's averaged
    ones) and the last parameters against the reference, within bounds measured on this run, or
    VerificationError."""
    torch, p = w.torch, w.params
    x, y = _read_all(w)
    gpu = w.ctx.device == "gpu"
    if gpu:
        need = x.nbytes + y.nbytes
        on_device = need < 0.5 * free_device_memory()
        x, y = (x.to(w.compute_device), y.to(w.compute_device)) if on_device else (x, y)

    def reference(module):
        return Reference(
            torch,
            p,
            module,
            w.loss_fn,
            w.transform,
            x,
            y,
            w.compute_device,
            w.param_dtype,
            w.ctx.size,
            gpu,
            w.stepper.reseed,
            w.stepper.deterministic_steps,
        )

    whole = Sampler(w.rows, w.shards, 1, 0, w.global_batch, p.seed)
    hint = (
        ""
        if w.stepper.reseed
        else " (a forward that draws random numbers itself, not through nn.Dropout, needs params.reseed: true)"
    )
    if gathered:
        checker = reference(copy.deepcopy(w.start_state))
        gradients = {
            "compared": "each rank's own gradient as it entered the allreduce (DDP's bucket), element by element, "
            "against the reference's gradient of the same micro-batches from the run's parameters at that step",
            "steps": sorted(gathered["steps"]),
            "kernels": f"{DETERMINISTIC} on both sides for these steps" if gpu else "the CPU's, on both sides",
            **_bound_words("its second computation of the same micro-batches"),
            **check_ranks(checker, whole.window, w.stepper.checked_states, gathered),
        }
        checker = None
    # the whole training twice: the second reference's start one rounding away, its sums in another order (copies
    # of the start taken before the first reference trains it)
    other = reference(one_ulp_away(torch, copy.deepcopy(w.start_state), p.seed))
    reordered = None if gathered else reference(copy.deepcopy(w.start_state))
    ref = reference(w.start_state)
    seconds = ref.train(whole.window, 0, w.stepper.step, False)
    expected = host_tensors(ref.module)
    seconds += other.train(whole.window, 0, w.stepper.step, True)
    if not gathered:  # ddp-graph, SyncBatchNorm: the first step's gradients after the allreduce
        first = {name: t.detach().cpu().double().numpy() for name, t in (w.stepper.first_grads or {}).items()}
        seconds += reordered.train(whole.window, 0, 1, True)  # the first step again, the ranks summed in another order
        summary, failure = judge(first, ref.first_grads, reordered.first_grads, "the first step's averaged gradient of")
        if failure:
            raise VerificationError(failure)
        gradients = {
            "compared": "the first step's gradient averaged over the ranks (after the allreduce: one rank's change "
            f"is divided by {w.ctx.size}), element by element, against the reference's",
            "steps": [0],
            "kernels": _first_step_kernels(gpu, w.stepper.deterministic_steps),
            **_bound_words("the first step again with the ranks summed in another order"),
            **summary,
        }
    spread, _ = compare(host_tensors(other.module), expected, 0.0, "")
    parameters = {
        "compared": "every parameter and buffer after the last step, each tensor's relative RMS error",
        "steps": w.stepper.step,
        "rounding_spread": spread,
    }
    if spread > MAX_SPREAD:
        parameters.update(
            checked=False,
            why=f"two references of this training, one rounding step apart, differ by {spread:.3g} (beyond "
            f"{MAX_SPREAD:g}): rounding alone carries it further than a comparison could tell a fault from",
        )
    else:
        bound = SPREAD_FACTOR * max(spread, FLOOR)
        error, failure = compare(run_tensors, expected, bound, "after the last step, parameter or buffer")
        if failure:
            raise VerificationError(f"after {w.stepper.step} steps: {failure}{hint}")
        parameters.update(checked=True, bound=bound, error=error)
    return {
        "gradients": gradients,
        "parameters": parameters,
        "reference_seconds": seconds,
        "buffers": "rank 0's (DDP broadcasts them before every forward)" if list(ref.module.buffers()) else None,
    }


def _first_step_kernels(gpu: bool, deterministic_steps: int) -> str:
    if not gpu:
        return "the CPU's, on both sides"
    if deterministic_steps:
        return f"{DETERMINISTIC} on both sides for this step"
    # ddp-graph: its first step is a replay of the graph as captured
    return (
        "the CUDA graph's in the run, the same operations eagerly in the reference: where a kernel has no "
        "deterministic form, a rounding it flips may go beyond what one recomputation showed"
    )


def _bound_words(second: str) -> dict:
    return {
        "bound": f"relative to |element| + the tensor's rms: {FLOOR:.3g} where the reference and {second} agree bit "
        f"for bit, else {BOUND_FACTOR} x the largest difference between them"
    }


def _read_all(w):
    """Every row and target (rank 0, for the reference), read again with h5py: independent of the run's path."""
    x, y = read_all(w.cfg, w.ctx, w.rows, w.row_shape, w.dtype)
    return w.torch.from_numpy(x), w.torch.from_numpy(y)


def compare(run: dict, reference: dict, bound: float, what: str) -> tuple[float, str | None]:
    """The largest relative RMS error of a tensor of ``run`` against ``reference`` (name -> NumPy float64 arrays),
    and the first tensor beyond ``bound`` described (None when all are within)."""
    worst, failure = 0.0, None
    for name, ref in reference.items():
        rms = np.sqrt(np.mean(ref**2)) + np.finfo(np.float64).tiny
        err = float(np.sqrt(np.mean((run[name] - ref) ** 2)) / rms)
        err = err if np.isfinite(err) else float("inf")
        worst = max(worst, err)
        if err > bound and failure is None:
            failure = (
                f"{what} {name}: relative RMS error {err:.3g} against the one-process reference, beyond the bound "
                f"{bound:.3g}"
            )
    return worst, failure


def one_ulp_away(torch, module, seed: int):
    """``module`` with every floating parameter moved one rounding step up or down (seeded random signs): the start
    of a reference that differs from the first by rounding only."""
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for t in module.parameters():
            if t.is_floating_point():
                sign = torch.randint(0, 2, t.shape, generator=generator).to(t.device, t.dtype) * 2 - 1
                t.mul_(1 + sign * torch.finfo(t.dtype).eps)
    return module

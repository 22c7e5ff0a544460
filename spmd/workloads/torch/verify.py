"""What verifies a torch run: the replicas identical, and the run against the one-process reference (``reference``).

The first step's gradients are compared element by element, the parameters after the last step by each tensor's
relative RMS error, within bounds set by the precision and by how far rounding alone carries this training.
"""

from __future__ import annotations

import copy

import numpy as np

from ...core.errors import VerificationError
from ...core.memory import free_device_memory
from ..training.checks import digest, require_identical_replicas
from ..training.data import Sampler
from .inputs import read_all
from .reference import Reference, host_tensors

# The run and the reference may differ by rounding only (their sums run in another order). The parameters
# after every step are compared by each tensor's relative RMS error (Adam turns rounding in a near-zero gradient
# into a step of up to lr, so single elements may drift further), within the tolerance or SPREAD_FACTOR times
# the difference between two references, the second started one rounding step away and dividing the ranks'
# gradients after their sum (a model with ties, max-pooling, or Adam on near-zero gradients turns rounding
# into differences that grow step by step; BLAS results may even depend on memory alignment); the first step's gradients (same parameters
# on both sides) element by element: |run - reference| <= GRADIENT_FACTOR * tolerance * (|reference| + the rms
# of every gradient of the model), so one element changed by 1% shows unless it is ~30x below that rms.
TOLERANCES = {
    ("fp32", "cpu"): 1e-5,
    ("fp32", "gpu"): 1e-4,
    ("tf32", "gpu"): 5e-3,
    ("bf16", "gpu"): 3e-2,
    ("bf16", "cpu"): 3e-2,
}


SPREAD_FACTOR = 10  # the parameters may differ from the reference by 10x what two roundings of it differ by
GRADIENT_FACTOR = 10  # a gradient is one step's rounding; cancellation (a sum near zero) makes it relative noise


def tolerance(precision: str, device: str) -> float:
    return TOLERANCES.get((precision, device), TOLERANCES[("tf32", "gpu")])


def verify_torch(w) -> dict:
    """The run of TorchWorkload ``w`` verified on every rank (collective): replicas, then rank 0 against the
    reference; report.json's ``verification``."""
    ctx = w.ctx
    mine = host_tensors(w.stepper.module)
    # parameters only: a rank's buffers hold its own last forward's update until DDP broadcasts rank 0's
    named = {name: mine[name] for name, _ in w.stepper.module.named_parameters() if name in mine}
    sha = digest(named)
    require_identical_replicas(ctx, sha, w.stepper.step)
    outcome = ctx.agree(against_reference, w, mine, root_only=True)
    return {
        "reference": "the same steps in one process (DDP's semantics: each rank's micro-batch, gradients "
        "averaged over ranks, rank 0's buffers), same start and batches",
        "replicas_identical": True,
        "parameters_sha256": sha,
        **outcome,
    }


def against_reference(w, run_tensors: dict) -> dict:
    """Rank 0: two references of the run's steps (the second started one rounding step away), the run's first
    gradients and last parameters within their bounds, or VerificationError."""
    torch, p = w.torch, w.params
    x, y = _read_all(w)
    gpu = w.ctx.device == "gpu"
    if gpu:
        need = x.nbytes + y.nbytes
        on_device = need < 0.5 * free_device_memory()
        x, y = (x.to(w.compute_device), y.to(w.compute_device)) if on_device else (x, y)

    def reference(module, reverse: bool):
        ref = Reference(
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
        )
        return ref, ref.train(whole.window, 0, w.stepper.step, reverse)

    whole = Sampler(w.rows, w.shards, 1, 0, w.global_batch, p.seed)
    tol = tolerance(p.precision, w.ctx.device)
    # a second reference, its start one rounding away: how far rounding alone carries this training
    reversed_start = one_ulp_away(torch, copy.deepcopy(w.start_state), p.seed)
    ref, seconds = reference(w.start_state, False)
    expected = host_tensors(ref.module)
    other, more = reference(reversed_start, True)
    seconds += more
    spread, _ = compare(host_tensors(other.module), expected, 0.0, "", elementwise=False)
    param_tol = max(tol, SPREAD_FACTOR * spread)
    error, failure = compare(
        run_tensors, expected, param_tol, "after the last step, parameter or buffer", elementwise=False
    )
    first = {name: t.detach().cpu().double().numpy() for name, t in (w.stepper.first_grads or {}).items()}
    grad_error, grad_failure = compare(
        first, ref.first_grads, GRADIENT_FACTOR * tol, "the first step's gradient of", elementwise=True
    )
    if grad_failure or failure:
        hint = (
            ""
            if w.stepper.reseed
            else (" (a forward that draws random numbers itself, not through nn.Dropout, needs params.reseed: true)")
        )
        raise VerificationError(f"after {w.stepper.step} steps: {grad_failure or failure}{hint}")
    return {
        "steps_compared": w.stepper.step,
        "parameter_relative_rms_error": error,
        "first_gradient_relative_error": grad_error,
        "tolerance": tol,
        "gradient_tolerance": GRADIENT_FACTOR * tol,
        "rounding_spread": spread,
        "parameter_tolerance": param_tol,
        "reference_seconds": seconds,
        "buffers": "rank 0's (DDP broadcasts them before every forward)" if list(ref.module.buffers()) else None,
    }


def _read_all(w):
    """Every row and target (rank 0, for the reference), read again with h5py: independent of the run's path."""
    x, y = read_all(w.cfg, w.ctx, w.rows, w.row_shape, w.dtype)
    return w.torch.from_numpy(x), w.torch.from_numpy(y)


def compare(run: dict, reference: dict, tol: float, what: str, elementwise: bool) -> tuple[float, str | None]:
    """The largest error of ``run`` against ``reference`` (name -> NumPy float64 arrays), and the first tensor
    beyond ``tol`` described (None when all are within): element by element relative to |reference| + the
    tensor's rms, or (``elementwise`` False) each tensor's relative RMS error."""
    worst, failure = 0.0, None
    every = np.concatenate([ref.reshape(-1) for ref in reference.values()]) if reference else np.zeros(1)
    floor = np.sqrt(np.mean(every**2))  # a gradient that is zero but for rounding (a bias before a norm)
    for name, ref in reference.items():
        got = run[name]
        rms = np.sqrt(np.mean(ref**2)) + np.finfo(np.float64).tiny
        if elementwise:
            err = np.abs(got - ref) / (np.abs(ref) + floor + np.finfo(np.float64).tiny)
        else:
            err = np.array([np.sqrt(np.mean((got - ref) ** 2)) / rms])
        bad = ~np.isfinite(err) | (err > tol)
        largest = float(np.nanmax(err)) if np.isfinite(err).any() else float("inf")
        worst = max(worst, largest if bad.sum() < bad.size or np.isfinite(largest) else float("inf"))
        if bad.any() and failure is None:
            if elementwise:
                i = int(np.argmax(bad.reshape(-1)))
                failure = (
                    f"{what} {name} element {i}: {float(got.reshape(-1)[i])!r} in the run, "
                    f"{float(ref.reshape(-1)[i])!r} in the one-process reference ({int(bad.sum())} of "
                    f"{bad.size} elements beyond the tolerance {tol:g})"
                )
            else:
                failure = (
                    f"{what} {name}: relative RMS error {float(err[0]):.3g} against the one-process "
                    f"reference, beyond the tolerance {tol:g}"
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

"""What verifies a train run: identical replicas, finite parameters, one rank's last window stepped again, the
first step's gradient against a float64 NumPy reference (``gradcheck``), and the held-out accuracy."""

from __future__ import annotations

import numpy as np

from ...core.errors import VerificationError
from ..training.checks import require_identical_replicas, sum_over_ranks
from .checkpoint import state_digest
from .gradcheck import GRADIENT_RTOL
from .layout import held_out_sums
from .trainer import require_same_parameters


def verify_train(w) -> tuple[dict, float | None, float | None]:
    """The run of TrainWorkload ``w`` verified on every rank (collective): report.json's ``verification``, and
    the held-out loss and accuracy."""
    ctx = w.ctx
    weights, state = w.trainer.host_state()
    digest = state_digest(weights, state)
    require_identical_replicas(ctx, digest, w.trainer.step, "parameters or optimizer state")
    ctx.agree(require_finite_parameters, weights, w.trainer.step, w.global_batch, w.params.lr)
    if ctx.size == 1 and w.windows_run:
        ctx.agree(same_as_eager, w, weights)
    check = w.gradient_check
    tol = GRADIENT_RTOL[w.params.gemm_precision or w.params.dtype]
    ctx.agree(check.judge, tol, root_only=True)
    eval_loss, eval_accuracy = evaluate(w)
    target = w.params.target_accuracy
    if target is not None and eval_accuracy < target:
        raise ctx.collective_error(
            VerificationError,
            0,
            f"held-out accuracy {eval_accuracy:.4f} after "
            f"{w.trainer.step} steps is below params.target_accuracy {target}",
        )
    return (
        {
            "reference": "float64 NumPy gradient of the first step, summed over ranks by MPI",
            "gradient_relative_error": check.errors,
            "tolerance": tol,
            "relu_sides_from_run": check.sides_from_run,
            "hidden_units": check.hidden_units,
            "replicas_identical": True,
            "parameters_sha256": digest,
        },
        eval_loss,
        eval_accuracy,
    )


def same_as_eager(w, weights: np.ndarray) -> None:
    """One rank: the last window stepped again from its starting state, eagerly (never the graph), must
    end on the run's parameters: what replicas would show, a silently wrong step shows here."""
    step = w.window_start[0]
    again = w.trainer.replay_window(w.window_start, w.sampler.window(step, w.params.steps), w.params.steps)
    require_same_parameters(
        weights, again, f"the last window's {w.params.steps} step(s), run again eagerly from its starting state,"
    )


def evaluate(w) -> tuple[float | None, float | None]:
    """Loss and accuracy on the held-out set (each rank its rows), summed over ranks."""
    if w.eval_x is None:
        return None, None
    loss, correct = held_out_sums(w.ctx.xp, w.layout, w.trainer.w, w.eval_x, w.eval_y)
    loss, correct, total = sum_over_ranks(w.ctx, loss, correct, len(w.eval_x))
    return loss / total, correct / total


def require_finite_parameters(weights, step, global_batch, lr) -> None:
    if not np.isfinite(weights).all():
        raise VerificationError(
            f"parameters are not finite after {step} steps at global batch {global_batch} and "
            f"lr {lr:g}: training diverged (lower params.lr; weak scaling keeps lr while the "
            f"global batch grows with the ranks)"
        )

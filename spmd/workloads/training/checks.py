"""Checks both training workloads make of a run: identical replicas, finite losses, sums over ranks."""

from __future__ import annotations

import hashlib

import numpy as np

from ...core.errors import VerificationError


def digest(arrays: dict) -> str:
    """SHA-256 over named arrays, in name order: equal only when every byte is."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(name.encode())
        h.update(np.ascontiguousarray(arrays[name]).tobytes())
    return h.hexdigest()


def require_identical_replicas(ctx, mine: str, step: int, what: str = "parameters") -> None:
    """Every rank's digest equal to rank 0's, or a collective VerificationError naming the first that is not."""
    digests = ctx.comm.allgather(mine)
    differ = [r for r, d in enumerate(digests) if d != digests[0]]
    if differ:
        raise ctx.collective_error(
            VerificationError, differ[0], f"{what} differ from rank 0's after {step} steps: the replicas diverged"
        )


def require_finite_losses(losses: np.ndarray, first_step: int) -> None:
    """A window's losses finite, or VerificationError naming the step (exit 3)."""
    bad = np.flatnonzero(~np.isfinite(losses))
    if len(bad):
        raise VerificationError(
            f"the loss is {losses[bad[0]]} at step {first_step + int(bad[0])}: training diverged "
            f"(lower params.optimizer.lr, or look for a bad input row)"
        )


def sum_over_ranks(ctx, *values: float) -> list[float]:
    """Host numbers summed over the ranks (float64)."""
    sums = np.array(values, dtype=np.float64)
    ctx.allreduce_host(sums)
    return sums.tolist()

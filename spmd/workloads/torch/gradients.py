"""The bounds a gradient is held to, element by element, and the summary of the checks (checks.py holds the checks
made as the run takes its steps; this module's NumPy ``judge`` serves the first step's averaged gradient against the
one-process reference, under ddp-graph and SyncBatchNorm).

Both sides run the checked steps with deterministic kernels, so they compute the same operations on the same values.
Where a second computation agrees bit for bit the bound is a few float32 roundings (FLOOR); where a kernel without a
deterministic form makes them differ, BOUND_FACTOR times the largest difference in the tensor. Both relative to
|element| + the tensor's rms.
"""

from __future__ import annotations

import numpy as np

BOUND_FACTOR = 16  # where the reference's two computations differ: 16x the largest difference in the tensor
FLOOR = 2.0**-20  # where they agree bit for bit: a few float32 roundings
CAUGHT = 0.01  # the change of one element the check is asked to catch (a corrupt fault's 1%)
QUANTILES = (0.5, 0.9, 0.99)


class Bound:
    """The bound on |run - reference| of each element of one tensor, from the reference computed twice: an element
    may differ by ``level`` x (|reference| + the tensor's rms), ``level`` = FLOOR where the two computations agree
    bit for bit, else BOUND_FACTOR x the largest difference between them in units of the same scale."""

    def __init__(self, reference: np.ndarray, second: np.ndarray):
        reference = self.reference = reference.astype(np.float64)
        self.rms = float(np.sqrt(np.mean(reference**2))) if reference.size else 0.0
        self.scale = np.abs(reference) + self.rms + np.finfo(np.float64).tiny
        self.noise = float(np.max(np.abs(second - reference) / self.scale)) if reference.size else 0.0
        self.level = BOUND_FACTOR * self.noise if self.noise > 0 else FLOOR

    def excess(self, run: np.ndarray) -> np.ndarray:
        """Each element's error in units of its bound (beyond 1: not rounding)."""
        err = np.abs(run.astype(np.float64) - self.reference) / self.scale
        return np.where(np.isfinite(err), err / self.level, np.inf)

    def smallest_caught(self) -> np.ndarray:
        """For each non-zero element, the smallest relative change of it alone that exceeds the bound."""
        nonzero = self.reference != 0
        return self.level * self.scale[nonzero] / np.abs(self.reference[nonzero])


def judge(run: dict, reference: dict, second: dict, what: str) -> tuple[dict, str | None]:
    """``run`` (name -> array) against ``reference`` with bounds from ``second``: a summary for the report and the
    first element beyond its bound described (None when all are within)."""
    worst, worst_noise, failure = 0.0, 0.0, None
    caught = []
    for name, ref in reference.items():
        bound = Bound(ref, second[name])
        got = run[name].reshape(ref.shape) if name in run else np.zeros_like(ref)
        excess = bound.excess(got)
        worst_noise = max(worst_noise, bound.noise)
        if excess.size:
            worst = max(worst, float(np.max(excess)))
            caught.append(bound.smallest_caught())
        bad = excess > 1
        if bad.any() and failure is None:
            i = int(np.argmax(excess.reshape(-1)))
            failure = (
                f"{what} {name} element {i}: {float(got.reshape(-1)[i])!r} in the run, "
                f"{float(ref.reshape(-1)[i])!r} in the one-process reference: {float(excess.reshape(-1)[i]):.3g}x "
                f"the bound rounding allows ({int(bad.sum())} of {bad.size} elements beyond it)"
            )
    every = np.concatenate(caught) if caught else np.zeros(0)
    summary = {
        "largest_error_in_bounds": worst,
        "measured_rounding": worst_noise,
        "smallest_change_caught": {f"q{int(q * 100)}": float(np.quantile(every, q)) for q in QUANTILES}
        if every.size
        else None,
        "share_caught_at_1_percent": float(np.mean(every <= CAUGHT)) if every.size else None,
    }
    return summary, failure


def summarize(checks: list[dict]) -> dict:
    """The checks' worst case over steps and ranks, and each one."""
    known = [c for c in checks if c["smallest_change_caught"]]
    return {
        "largest_error_in_bounds": max((c["largest_error_in_bounds"] for c in checks), default=0.0),
        "measured_rounding": max((c["measured_rounding"] for c in checks), default=0.0),
        "smallest_change_caught": {
            q: max(c["smallest_change_caught"][q] for c in known) for q in known[0]["smallest_change_caught"]
        }
        if known
        else None,
        "share_caught_at_1_percent": min((c["share_caught_at_1_percent"] for c in known), default=None),
        "checks": checks,
    }

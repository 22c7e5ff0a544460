"""The first step's gradient against float64: what `train` verifies before it trains.

The gradient the training path reduced over the ranks is compared, layer by layer, with a float64
NumPy gradient of the same samples (and dropout masks) summed over the ranks by a plain MPI
allreduce. Checked at the first step: near convergence the softmax gradient p - 1 is a difference
of nearly equal numbers, and float32 rounding alone would reach the tolerance.

The reference takes the run's own side of every ReLU kink (network.relu_sides): a unit within
rounding of 0 may fall either way, and one such unit can move a layer's gradient by far more than
rounding does elsewhere. How many units it took from the run is
reported; far more than rounding explains is a wrong forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core import xp as xpmod
from ...core.errors import VerificationError
from .network import local_gradient, relu_sides
from .ops import BF16, HostOps, bf16_bits, bf16_values

GRADIENT_RTOL = {"float64": 1e-10, "float32": 1e-3, "tf32": 3e-2, "bf16": 5e-2}  # of each layer's gradient norm
# How many hidden units may be on the other side of the ReLU in the float64 reference than in
# the run: rounding puts a handful there (2 of 13.6 million in a 4096-sample batch of `large` in
# float32), a forward pass that computes something else about half of them.
RELU_SIDES_ALLOWED = (16, 1e-3)  # units, and share of the units where that is more


@dataclass(frozen=True)
class GradientCheck:
    """Each layer's ||g - g_ref|| / ||g_ref||, and the ReLU sides the reference took from the run."""

    errors: list[float]
    sides_from_run: int
    hidden_units: int
    step: int

    def judge(self, tolerance: float) -> None:
        """Raise VerificationError when the forward pass or the gradient is wrong."""
        allowed = max(RELU_SIDES_ALLOWED[0], RELU_SIDES_ALLOWED[1] * self.hidden_units)
        if self.sides_from_run > allowed:
            raise VerificationError(
                f"the forward pass at step {self.step} has {self.sides_from_run} of "
                f"{self.hidden_units} hidden units on the other side of the ReLU from the "
                f"float64 reference: more than rounding explains"
            )
        if not max(self.errors) <= tolerance:
            layer = int(np.argmax(self.errors))
            raise VerificationError(
                f"the reduced gradient of layer {layer} at step {self.step} is off by "
                f"{self.errors[layer]:.3g} (relative norm) from the float64 reference "
                f"(tolerance {tolerance:g})"
            )


def check_first_gradient(ctx, trainer, layout, p, batches, global_batch: int) -> GradientCheck:
    """Compare the gradient ``trainer`` holds (its warm-up step on ``batches``, this rank's
    micro-batches, reduced over the ranks of ``ctx``, no update) with the float64 reference."""
    step, keep, rank = trainer.step, 1.0 - p.dropout, ctx.rank
    weights, _ = trainer.host_state()
    got = xpmod.to_host(trainer.g).astype(np.float64)
    sides = relu_sides(layout, trainer.ops, trainer.wg, batches, step, keep, p.seed, rank)
    if trainer.wg.dtype == BF16:  # the reference starts from what the GEMMs read: bfloat16 weights and inputs
        weights = bf16_values(xpmod.to_host(trainer.wg))
        batches = [(bf16_values(bf16_bits(x)), y) for x, y in batches]
    ref, _, differ = local_gradient(
        layout,
        HostOps(np.float64),
        weights.astype(np.float64),
        batches,
        1.0 / global_batch,
        step,
        keep,
        p.seed,
        rank,
        sides=sides,
    )
    ctx.allreduce_host(ref)
    errors = []
    for s in layout.segments:
        want = ref[s.start : s.stop]
        diff = np.linalg.norm(got[s.start : s.stop] - want)
        errors.append(float(diff / max(np.linalg.norm(want), np.finfo(np.float64).tiny)))
    units = len(batches) * len(batches[0][0]) * sum(layout.widths[1:-1])
    counts = np.array([differ, units], dtype=np.int64)
    ctx.allreduce_host(counts)
    return GradientCheck(errors, int(counts[0]), int(counts[1]), step)

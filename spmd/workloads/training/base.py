"""``TrainingWorkload``: the part of a data-parallel training workload that does not depend on its model.

Strong scaling keeps the global batch (the per-rank batch shrinks), weak scaling keeps the per-rank batch; a
repeat is a window of ``params.steps`` optimizer steps, so progress and metrics speak in steps and samples.
"""

from __future__ import annotations

import dataclasses
import statistics
from fractions import Fraction

from ...core.errors import ConfigError
from ..base import Workload


class TrainingWorkload(Workload):
    """Subclasses set ``global_batch`` in setup and append each window's mean loss to ``losses``."""

    global_batch: int
    losses: list[float]
    METRIC_PHASES: tuple[str, ...] = ()  # the phases a step's breakdown reports, in ms per step

    @classmethod
    def strong_config(cls, cfg, factor):
        """Strong scaling keeps the global batch: the per-rank batch shrinks by ``factor``."""
        return split_batch(cfg, factor)

    @classmethod
    def weak_config(cls, cfg, factor):
        """Weak scaling keeps the per-rank batch (the global batch grows with the ranks); same data."""
        return cfg

    @classmethod
    def share_config(cls, cfg, factor):
        """A rank of a strong run at ``factor`` times the ranks trains ``params.batch / factor`` samples a step."""
        return split_batch(cfg, factor)

    def progress_note(self, seconds: float) -> str:
        steps = self.params.steps
        loss = f", loss {self.losses[-1]:.4g} (the window before)" if self.losses else ""
        return f"{steps / seconds:,.0f} steps/s, {self.global_batch * steps / seconds:,.0f} samples/s{loss}"

    def metrics(self, rank_medians):
        """Samples/s and the step's time from the slowest rank; each phase per step, the median over ranks."""
        steps = self.params.steps
        total = max(m["total"] for m in rank_medians)
        per_step = {
            phase: statistics.median(m.get(phase, 0.0) for m in rank_medians) / steps * 1e3
            for phase in self.METRIC_PHASES
            if any(phase in m for m in rank_medians)
        }
        return {
            "samples_per_s": self.global_batch * steps / total,
            "step_ms": total / steps * 1e3,
            "phase_ms_per_step": per_step,
        }


def split_batch(cfg, factor):
    """Strong scaling of a training config: the global batch kept, so the per-rank ``params.batch`` shrinks by
    ``factor`` (a Fraction); ConfigError where it does not divide."""
    batch = Fraction(cfg.params.batch) / factor
    if batch.denominator != 1:
        raise ConfigError(
            f"params.batch: {cfg.params.batch} samples per rank cannot be split over {factor}x "
            f"the ranks for strong scaling (use a batch divisible by it, or --mode weak)"
        )
    return dataclasses.replace(cfg, params=dataclasses.replace(cfg.params, batch=int(batch)))

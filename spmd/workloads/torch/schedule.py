"""Which steps verification checks: the first few, more drawn at random in the windows of steps, and the last.

A window is one repeat's steps (warm-up repeats included), counted as they run, so a run that repeats until its
timing is tight (``repeats: auto``) gets its draws in every repeat it takes. The random ones come from a seed drawn
when the run starts (or ``params.verify_seed``) and the window's number, never from the step number alone: a fault
that comes and goes with the step cannot know which steps are checked. A checked step is one of the window's steps,
taken outside the timing (``Trainer``; the window's time is its timed steps' scaled to all of them), and every
window keeps one timed step at least. The run's last step is checked in its window where that window is known
(``TorchWorkload.schedule``), else it is one more step after the repeats. So the run trains the same steps whichever
are checked: a checked step changes how a step is watched, never what is trained.

The drawn checks are kept within a budget (``Budget``): a share of the run's wall time so far, set-up included.
A window gets its draws only while the checks made, the drawn ones and the last step's stay within it, so the
checks spread evenly over a long run and a short one keeps its first and last steps checked.
"""

from __future__ import annotations

import secrets

import numpy as np


def draw_seed() -> int:
    """A seed for the checked steps, drawn when the run starts (rank 0's, broadcast by the caller)."""
    return secrets.randbits(63)


class CheckSchedule:
    """The checked steps of one run.

    Args:
        first: the run's first steps, all checked (``params.verify_steps``).
        per_window: steps drawn at random among each window's (``params.verify_per_repeat``).
        seed: the draw's seed.
        last: whether the run's last step is checked too (a change from some step on is then always caught).
    """

    def __init__(self, first: int, per_window: int, seed: int, last: bool = True):
        self.first, self.per_window, self.seed = first, per_window, seed
        self.last = last and (first > 0 or per_window > 0)

    @property
    def active(self) -> bool:
        return self.first > 0 or self.per_window > 0

    def window(
        self, number: int, first_step: int, steps: int, drawn: int | None = None, holds_last: bool = False
    ) -> list[bool]:
        """Window ``number`` (0, 1, ... as the run takes them), starting at step ``first_step``, of ``steps`` steps,
        with ``drawn`` of them drawn at random (``per_window`` when None; ``Budget.granted``): for each step, whether
        it is checked. ``holds_last``: the window ends the run, and its last step is checked too. One step of the
        window stays timed."""
        plan = [False] * steps
        if not self.active:
            return plan
        early = min(max(0, self.first - first_step), steps - 1)  # the run's first steps, still to come
        plan[:early] = [True] * early
        wanted = self.per_window if drawn is None else min(drawn, self.per_window)
        # a fixed order of the window's other steps: fewer draws granted take the first of the same ones
        order = np.random.default_rng([self.seed, number]).permutation(np.arange(early, steps))
        for place in order[: min(wanted, steps - early - 1)]:
            plan[int(place)] = True
        if holds_last and self.last and (plan[-1] or plan.count(False) > 1):
            plan[-1] = True
        return plan


class Budget:
    """The drawn checks kept within ``share`` of the run's wall time (``params.verify_budget``; 1 or more: no bound).

    A check's cost is its checked step's whole wall time (the step, its checks, and the copies around them), as
    measured so far; before any, ``CHECK_IN_STEPS`` times a timed step's. ``skipped``: the draws left out."""

    CHECK_IN_STEPS = 3  # a check before one was measured: the step, its recomputation, and what they copy and compare

    def __init__(self, share: float):
        self.share = share
        self.skipped = 0

    def per_check(self, made: int, seconds: float, step_seconds: float | None, trial_seconds: float) -> float:
        """A check's seconds: the ``made`` ones' mean, or ``CHECK_IN_STEPS`` timed steps, or before any step was
        timed, twice the trial step's micro-batch (cold: the most it can be)."""
        if made:
            return seconds / made
        return self.CHECK_IN_STEPS * step_seconds if step_seconds is not None else 2 * trial_seconds

    def granted(self, wanted: int, elapsed: float, spent: float, per_check: float, reserve: float) -> int:
        """How many of ``wanted`` draws fit: the checks' ``spent`` seconds, each drawn one at ``per_check`` and the
        ``reserve`` still owed (the last step's check) within ``share`` of the ``elapsed`` wall time."""
        if self.share >= 1:
            return wanted
        n = 0
        while n < wanted and spent + (n + 1) * per_check + reserve <= self.share * elapsed:
            n += 1
        self.skipped += wanted - n
        return n


def escape_shares(checked: list[int], total: int, lengths: tuple[int, ...]) -> dict[str, float]:
    """For a change on ``k`` consecutive steps starting at any step of a run of ``total`` steps, the share of its
    starts where none of its steps was checked: the chance it escapes when it starts at a random step."""
    marks = np.zeros(total + 1, dtype=np.int64)
    for step in checked:
        if 0 <= step < total:
            marks[step + 1] = 1
    before = np.cumsum(marks)  # before[s]: checked steps among 0 .. s-1
    out = {}
    for k in lengths:
        if k > total:
            continue
        starts = np.arange(total - k + 1)
        out[str(k)] = float(np.mean(before[starts + k] - before[starts] == 0))
    return out


def steps_words(checked: list[int], total: int) -> str:
    """'0, 1, 23, 41 and 66 of 80' (the steps numbered from 0)."""
    if not checked:
        return f"none of {total}"
    names = [str(s) for s in checked]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"{listed} of {total}"

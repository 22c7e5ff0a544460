"""Which steps verification checks: the first few, more drawn at random in every window of steps, and the last.

A window is one repeat's steps (warm-up repeats included), counted as they run, so a run that repeats until its
timing is tight (``repeats: auto``) gets its checks in every repeat it takes. The random ones come from a seed drawn
when the run starts (or ``params.verify_seed``) and the window's number, never from the step number alone: a fault
that comes and goes with the step cannot know which steps are checked. A checked step is a step of the training
like any other; it runs outside the timing (``Stepper``), so a window holds its ``steps`` timed steps and its
checked ones besides.
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

    def window(self, number: int, first_step: int, steps: int) -> list[bool]:
        """Window ``number`` (0, 1, ... as the run takes them), starting at step ``first_step``, with ``steps``
        timed steps: for each step it takes, whether it is checked (its checked steps come besides the timed ones)."""
        if not self.active:
            return [False] * steps
        plan = [False] * steps
        early = max(0, self.first - first_step)  # the run's first steps, still to come
        plan[:0] = [True] * early
        rng = np.random.default_rng([self.seed, number])
        for _ in range(self.per_window):  # a checked step slotted in at a random place among the window's steps
            plan.insert(int(rng.integers(early, len(plan) + 1)), True)
        return plan


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

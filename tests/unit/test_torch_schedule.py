"""Verification's checked steps (spmd.workloads.torch.schedule), over generated runs: every window keeps its timed
steps and gets its checks, the first steps are checked, the draw follows its seed, and the escape chance is what
counting the unchecked spans gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spmd.workloads.torch.schedule import CheckSchedule, escape_shares, steps_words


def run_plan(schedule: CheckSchedule, steps: int, windows: int) -> list[bool]:
    plan: list[bool] = []
    for number in range(windows):
        plan += schedule.window(number, len(plan), steps)
    return plan


@settings(max_examples=200, deadline=None)
@given(
    first=st.integers(0, 8),
    per_window=st.integers(0, 8),
    seed=st.integers(0, 2**63 - 1),
    steps=st.integers(1, 40),
    windows=st.integers(1, 6),
)
def test_every_window_keeps_its_timed_steps_and_gets_its_checks(first, per_window, seed, steps, windows):
    schedule = CheckSchedule(first, per_window, seed)
    plan = run_plan(schedule, steps, windows)
    start = 0
    for number in range(windows):
        window = schedule.window(number, start, steps)
        assert window.count(False) == steps  # the timed steps, all there
        assert window.count(True) == per_window + max(0, first - start)  # its draws, and the run's first steps
        start += len(window)
    assert all(plan[:first])  # the run's first steps are checked
    assert plan == run_plan(CheckSchedule(first, per_window, seed), steps, windows)  # the seed decides the draw


def test_the_draw_moves_with_the_seed_not_the_step_number():
    plans = {tuple(run_plan(CheckSchedule(2, 1, seed), 10, 5)) for seed in range(20)}
    assert len(plans) > 10


@settings(max_examples=200, deadline=None)
@given(checked=st.sets(st.integers(0, 59)), total=st.integers(1, 60), k=st.integers(1, 12))
def test_the_escape_chance_counts_the_spans_with_no_checked_step(checked, total, k):
    shares = escape_shares(sorted(checked), total, (k,))
    if k > total:
        assert shares == {}
        return
    starts = range(total - k + 1)
    escaped = sum(not any(s <= c < s + k for c in checked) for s in starts)
    assert shares[str(k)] == escaped / len(starts)


def test_the_steps_are_named_in_words():
    assert steps_words([0, 1, 23], 80) == "0, 1 and 23 of 80"
    assert steps_words([5], 9) == "5 of 9"
    assert steps_words([], 9) == "none of 9"

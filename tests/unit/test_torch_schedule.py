"""Verification's checked steps (spmd.workloads.torch.schedule), over generated runs: every window keeps its timed
steps and gets its checks, the first steps are checked, the draw follows its seed, and the escape chance is what
counting the unchecked spans gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spmd.workloads.torch.schedule import Budget, CheckSchedule, escape_shares, steps_words


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
def test_every_window_keeps_its_steps_one_timed_and_gets_its_checks(first, per_window, seed, steps, windows):
    """A window's checked steps are among its own (the run trains the same steps whichever are checked), one of
    them at least stays timed, the run's first steps are checked as far as that allows, and the draws fill the rest;
    fewer draws granted check a subset of the same steps."""
    schedule = CheckSchedule(first, per_window, seed)
    for number in range(windows):
        start = number * steps
        window = schedule.window(number, start, steps)
        early = min(max(0, first - start), steps - 1)
        assert len(window) == steps and window.count(False) >= 1
        assert all(window[:early])
        assert window.count(True) == early + min(per_window, steps - early - 1)
        for drawn in range(per_window + 1):
            fewer = schedule.window(number, start, steps, drawn)
            assert fewer.count(True) == early + min(drawn, steps - early - 1)
            assert all(w for f, w in zip(fewer, window) if f)  # the same places, fewer of them
        ending = schedule.window(number, start, steps, holds_last=True)  # the run's last window
        assert ending.count(False) >= 1 and all(e for w, e in zip(window, ending) if w)
        assert ending[-1] == (schedule.last and (window[-1] or window.count(False) > 1))
    assert run_plan(schedule, steps, windows) == run_plan(CheckSchedule(first, per_window, seed), steps, windows)


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


@settings(max_examples=200, deadline=None)
@given(
    share=st.floats(0.01, 0.5),
    setup=st.floats(0.0, 10.0),
    step=st.floats(0.001, 0.2),
    per_check_steps=st.floats(1.0, 6.0),
    steps=st.integers(1, 40),
    windows=st.integers(1, 60),
    per_window=st.integers(1, 3),
)
def test_the_drawn_checks_stay_within_the_budget_and_spread_over_the_run(
    share, setup, step, per_check_steps, steps, windows, per_window
):
    """A run simulated window by window (the first step and the last always checked): where those two fit the
    budget, the whole run's checks stay within its share of the wall time; a draw is left out only when it would
    not fit (so the budget left unspent at any window is less than one check and the reserve)."""
    budget, per_check = Budget(share), per_check_steps * step
    elapsed = setup + per_check  # set-up, then the first step's check
    spent, drawn = per_check, 0
    for _ in range(windows):
        granted = budget.granted(per_window, elapsed, spent, per_check, per_check)
        assert 0 <= granted <= per_window
        if granted < per_window:  # one more would not have fit
            assert spent + (granted + 1) * per_check + per_check > share * elapsed
        spent += granted * per_check
        drawn += granted
        elapsed += steps * step + granted * per_check
    spent += per_check  # the last step's
    elapsed += per_check
    if 2 * per_check <= share * (setup + per_check):  # the two that are always made fit from the start
        assert spent <= share * elapsed + 1e-9
    assert budget.skipped == windows * per_window - drawn


def test_a_budget_of_one_takes_every_draw():
    assert Budget(1.0).granted(3, elapsed=0.0, spent=100.0, per_check=1.0, reserve=1.0) == 3

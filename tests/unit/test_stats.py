"""The confidence interval of a median (order statistics) against the binomial it rests on and against
simulation, and the repeats: auto rule that stops on it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from spmd.core.stats import BOUND, coverage, median_interval, ratio_interval
from spmd.job import RepeatPlan


@pytest.mark.parametrize("n", [2, 5, 6, 10, 25, 100])
def test_coverage_is_the_binomial_probability_between_the_order_statistics(n):
    for j in range(1, n // 2 + 1):
        expected = scipy_stats.binom.cdf(n - j, n, 0.5) - scipy_stats.binom.cdf(j - 1, n, 0.5)
        assert coverage(n, j) == pytest.approx(expected, abs=1e-12)


def test_the_widest_order_statistics_that_reach_95_percent_are_chosen():
    five = median_interval([5.0, 1.0, 4.0, 2.0, 3.0])  # too few for 95%: [min, max] at 93.75%
    assert (five.low, five.median, five.high, five.level, five.n) == (1.0, 3.0, 5.0, 1 - 2 / 32, 5)
    ten = median_interval(range(1, 11))  # [x_2, x_9] holds 97.9%, [x_3, x_8] only 89%
    assert (ten.low, ten.high) == (2, 9) and ten.level == pytest.approx(1 - 2 * 11 / 1024)
    one = median_interval([7.0])
    assert (one.low, one.median, one.high, one.level) == (7.0, 7.0, 7.0, 0.0)
    with pytest.raises(ValueError):
        median_interval([])


@pytest.mark.parametrize("n", [6, 20, 60])
def test_the_interval_holds_the_true_median_95_percent_of_the_time_for_a_skewed_time(n):
    """Timings have a long right tail: lognormal repeats, 4000 trials; the interval must cover the true median
    at least 95% of the time (within the simulation's error), as the level it states says."""
    rng = np.random.default_rng(n)
    true_median = math.exp(0.0)
    trials = 4000
    hits = levels = 0.0
    for _ in range(trials):
        iv = median_interval(rng.lognormal(0.0, 0.5, n))
        hits += iv.low <= true_median <= iv.high
        levels += iv.level
    assert levels / trials >= 0.95
    assert hits / trials >= levels / trials - 3 * math.sqrt(0.05 * 0.95 / trials)


def test_a_ratio_takes_the_ends_of_both_intervals():
    base, other = median_interval([9.0, 10.0, 11.0]), median_interval([4.0, 5.0, 6.0])
    assert ratio_interval(base, other) == (9.0 / 6.0, 11.0 / 4.0)


class FakeComm:
    """The one collective RepeatPlan makes, on one rank: Allreduce(IN_PLACE, max) leaves the values as they are."""

    def Allreduce(self, _in_place, buf, op=None):  # noqa: N802 - MPI's name
        pass


class FakeCtx:
    comm = FakeComm()


def run_plan(totals, max_seconds: float, monkeypatch, warmup: int = 1):
    """Feed ``totals`` (each repeat's seconds) to an auto plan on a fake clock; (repeats recorded, why stopped)."""
    clock = [0.0]
    monkeypatch.setattr("spmd.job.time.perf_counter", lambda: clock[0])
    plan = RepeatPlan(FakeCtx(), warmup, 6, True, max_seconds)
    i = 0
    while plan.wants(i):
        total = 1.0 if i < warmup else totals[(i - warmup) % len(totals)]
        clock[0] += total
        plan.done(i, total)
        i += 1
        assert i < 10_000
    return len(plan.totals), plan.rule()


def test_auto_stops_once_a_quiet_timing_is_tight(monkeypatch):
    quiet = list(1.0 + 0.005 * np.random.default_rng(0).standard_normal(50))
    n, rule = run_plan(quiet, 30.0, monkeypatch)
    assert n == 6 and rule["stopped"] == "tight" and rule["rule"] == "auto" and rule["bound"] == BOUND


def test_auto_stops_at_its_budget_when_the_timing_stays_wide(monkeypatch):
    bimodal = [1.0, 1.5] * 20
    n, rule = run_plan(bimodal, 12.0, monkeypatch)
    assert rule["stopped"] == "budget" and 8 <= n <= 10  # 12 s of 1.25 s repeats


def test_a_fixed_plan_runs_its_repeats_and_agrees_on_nothing():
    plan = RepeatPlan(None, 2, 3, False, 30.0)  # no communicator needed: nothing to agree on
    ran = 0
    while plan.wants(ran):
        plan.done(ran, 1.0)
        ran += 1
    assert ran == 5 and plan.rule() == {"rule": "fixed", "repeats": 3, "bound": BOUND}

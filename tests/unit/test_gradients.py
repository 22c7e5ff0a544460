"""The bound of the torch workload's per-rank gradient check (spmd.workloads.torch.gradients), on arrays with
known answers."""

import numpy as np
import pytest

from spmd.workloads.torch.gradients import BOUND_FACTOR, CAUGHT, FLOOR, Bound, judge


def gradient(seed=0, n=10_000):
    return np.random.default_rng(seed).standard_normal(n) * 1e-3


def test_two_computations_that_agree_bit_for_bit_leave_the_floor_and_catch_a_millionth():
    g = gradient()
    bound = Bound(g, g.copy())
    assert bound.noise == 0 and bound.level == FLOOR
    changed = g.copy()
    changed[17] *= 1 + 1e-4
    assert bound.excess(g).max() == 0 and bound.excess(changed)[17] > 1
    caught = bound.smallest_caught()  # FLOOR x (|g| + rms) / |g| for every element
    rms = np.sqrt(np.mean(g**2))
    assert np.allclose(caught, FLOOR * (np.abs(g) + rms) / np.abs(g))


def test_a_measured_difference_sets_the_bound_at_16_times_the_largest():
    g = gradient()
    second = g.copy()
    rms = np.sqrt(np.mean(g**2))
    second[3] += 1e-6 * (abs(g[3]) + rms)
    bound = Bound(g, second)
    assert bound.noise == pytest.approx(1e-6) and bound.level == pytest.approx(BOUND_FACTOR * 1e-6)
    inside, outside = g.copy(), g.copy()
    inside[5] += 15e-6 * (abs(g[5]) + rms)
    outside[5] += 17e-6 * (abs(g[5]) + rms)
    assert bound.excess(inside).max() < 1 < bound.excess(outside).max()


def test_judge_names_the_tensor_and_element_and_reports_the_power():
    ref = {"a.weight": gradient(1).reshape(100, 100), "a.bias": gradient(2, 100)}
    run = {k: v.copy().reshape(-1) for k, v in ref.items()}  # as the buckets hold them: flat
    summary, failure = judge(run, ref, ref, "step 0, rank 1's gradient of")
    assert failure is None and summary["largest_error_in_bounds"] == 0
    assert summary["share_caught_at_1_percent"] > 0.99 and summary["smallest_change_caught"]["q50"] < CAUGHT
    run["a.weight"][4242] *= 1.01
    _, failure = judge(run, ref, ref, "step 0, rank 1's gradient of")
    assert failure.startswith("step 0, rank 1's gradient of a.weight element 4242:") and "1 of 10000" in failure
    run["a.bias"][0] = np.nan  # not finite: beyond any bound
    _, failure = judge({**run, "a.weight": ref["a.weight"]}, ref, ref, "x")
    assert "a.bias element 0" in failure


def test_parameters_compare_by_relative_rms_and_a_nan_is_beyond_any_bound():
    from spmd.workloads.torch.verify import compare

    ref = {"w": np.ones(100), "b": np.full(10, 2.0)}
    run = {"w": np.ones(100) * (1 + 1e-4), "b": ref["b"].copy()}
    worst, failure = compare(run, ref, 1e-3, "after the last step, parameter")
    assert worst == pytest.approx(1e-4) and failure is None
    worst, failure = compare(run, ref, 1e-5, "after the last step, parameter")
    assert failure.startswith("after the last step, parameter w: relative RMS error 0.0001")
    run["b"][3] = np.nan
    worst, failure = compare(run, ref, 1.0, "p")
    assert worst == float("inf") and "p b:" in failure

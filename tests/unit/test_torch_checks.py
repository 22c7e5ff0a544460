"""The checks made at a checked step (spmd.workloads.torch.checks), over generated gradients: a run equal to its
recomputation passes at the floor, a 1% change of any element that is not rounding noise around zero is caught and
named, a second recomputation that differs widens the bound to what it measured, and rows are read as indexed."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="the checks need PyTorch (the torch extra)")

from spmd.workloads.torch.checks import _rows, judge  # noqa: E402
from spmd.workloads.torch.gradients import BOUND_FACTOR, FLOOR  # noqa: E402


def layout_of(sizes):
    return [(f"t{k}", n) for k, n in enumerate(sizes)]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=6).filter(lambda s: sum(s) > 0),
    seed=st.integers(0, 2**32 - 1),
    pick=st.floats(0, 1, exclude_max=True),
)
def test_a_one_percent_change_is_caught_and_named(sizes, seed, pick):
    rng = np.random.default_rng(seed)
    expected = torch.from_numpy(rng.standard_normal(sum(sizes)).astype(np.float32))
    summary, failure = judge(torch, expected.clone(), expected, None, layout_of(sizes))
    assert failure is None and summary["largest_error_in_bounds"] == 0 and summary["measured_rounding"] == 0
    i = int(pick * sum(sizes))
    k = int(np.searchsorted(np.cumsum(sizes), i, side="right"))
    start = sum(sizes[:k])
    rms = float(expected[start : start + sizes[k]].double().pow(2).mean().sqrt())
    run = expected.clone()
    run[i] *= 1.01
    _, failure = judge(torch, run, expected, None, layout_of(sizes))
    if abs(float(expected[i])) * 0.01 > FLOOR * (abs(float(expected[i])) + rms) * 1.01:  # beyond the floor
        assert failure is not None and failure.startswith(f"gradient of t{k} element {i - start}:"), failure
    else:  # rounding noise around zero: a 1% change is within the floor
        assert failure is None


def test_a_differing_second_recomputation_widens_the_bound_to_its_measure():
    rng = np.random.default_rng(0)
    expected = torch.from_numpy(rng.standard_normal(1000).astype(np.float32))
    second = expected.clone()
    second[3] += 1e-3
    run = expected.clone()
    run[7] += 1e-3
    summary, failure = judge(torch, run, expected, second, layout_of([1000]))
    assert failure is None and summary["measured_rounding"] > 0
    run[7] += BOUND_FACTOR * 2e-3 * 10
    _, failure = judge(torch, run, expected, second, layout_of([1000]))
    assert failure is not None and "element 7" in failure


def test_rows_are_read_run_by_run_as_fancy_indexing_reads_them(tmp_path):
    data = np.arange(50 * 3, dtype=np.float32).reshape(50, 3)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["x"] = data
    order = np.array([0, 1, 2, 9, 10, 30, 49])
    with h5py.File(tmp_path / "x.h5") as f:
        assert np.array_equal(_rows(f["x"], order), data[order])

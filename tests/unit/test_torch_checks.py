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

from spmd.workloads.torch.checks import SAMPLE, _all_equal, _rows, judge  # noqa: E402
from spmd.workloads.torch.gradients import BOUND_FACTOR, CAUGHT, FLOOR, Bound  # noqa: E402


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


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 40_000), min_size=1, max_size=5).filter(lambda s: sum(s) > 0),
    seed=st.integers(0, 2**32 - 1),
    zeros=st.floats(0, 0.5),
)
def test_what_the_bound_catches_is_numpys_on_every_element_or_a_fair_sample(sizes, seed, zeros):
    """The sensitivity summary against gradients.Bound (NumPy float64, every element): the same where the model has
    at most SAMPLE elements, within a sample's error where it has more."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(sum(sizes)) * rng.choice([1e-3, 1.0, 10.0], sum(sizes))
    values[rng.random(sum(sizes)) < zeros] = 0.0
    expected = torch.from_numpy(values.astype(np.float32))
    summary, _ = judge(torch, expected.clone(), expected, None, layout_of(sizes))
    every, offset = [], 0
    for n in sizes:
        part = expected[offset : offset + n].double().numpy()
        offset += n
        if n:
            every.append(Bound(part, part).smallest_caught())
    every = np.concatenate(every)
    if not every.size:
        assert summary["share_caught_at_1_percent"] is None
        return
    exact = float(np.mean(every <= CAUGHT))
    tolerance = 1e-12 if sum(sizes) <= SAMPLE else 4 / np.sqrt(SAMPLE * (1 - zeros))
    assert abs(summary["share_caught_at_1_percent"] - exact) <= tolerance
    if sum(sizes) <= SAMPLE:
        assert summary["smallest_change_caught"]["q50"] == pytest.approx(float(np.quantile(every, 0.5)), rel=1e-9)


def test_only_the_first_check_measures_what_the_bound_catches():
    expected = torch.ones(10)
    summary, failure = judge(torch, expected.clone(), expected, None, layout_of([10]), sensitivity=False)
    assert failure is None and summary["share_caught_at_1_percent"] is None


@given(seed=st.integers(0, 2**32 - 1), where=st.floats(0, 1, exclude_max=True))
@settings(max_examples=30, deadline=None)
def test_parameters_compare_equal_only_when_every_element_is(seed, where):
    rng = np.random.default_rng(seed)
    run = [torch.from_numpy(rng.standard_normal(n).astype(np.float32)) for n in (3, 50, 7)]
    run.append(torch.arange(4, dtype=torch.float64))
    expected = [t.clone() for t in run]
    assert _all_equal(torch, run, expected)
    flat = torch.cat([t.reshape(-1).double() for t in expected])
    i = int(where * flat.numel())
    k = int(np.searchsorted(np.cumsum([t.numel() for t in expected]), i, side="right"))
    expected[k].reshape(-1)[i - sum(t.numel() for t in expected[:k])] += 1
    assert not _all_equal(torch, run, expected)
    assert not _all_equal(torch, run[:1], [run[0].double()])  # another dtype is another value


def test_the_ring_connection_hands_what_its_thread_met_to_the_wait():
    """The ring's early connection runs in a thread: an error there (no such device, NCCL failing) is raised where
    set-up waits for it, never lost with the thread."""
    import types

    from spmd.workloads.torch.checks import RingConnection

    def no_device(index):
        raise RuntimeError(f"CUDA error: invalid device ordinal {index}")

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(set_device=no_device))
    ring = RingConnection(fake, 0, 2, 7)
    with pytest.raises(RuntimeError, match="invalid device ordinal 7"):
        ring.wait()


def _update_check(torch, seed: int = 3):
    """A real AdamW step's update check (StepChecks' own methods on the run's pieces), before the step is taken: the
    checks' stand-in, its module and the run's optimizer."""
    import types

    from spmd.workloads.torch.checks import StepChecks
    from spmd.workloads.torch.compute import make_optimizer

    torch.manual_seed(seed)
    module = torch.nn.Sequential(torch.nn.Linear(7, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    cfg = types.SimpleNamespace(name="adamw", lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    optimizer = make_optimizer(torch, cfg, module.parameters())  # the run's own, as the check rebuilds it
    module(torch.randn(4, 7)).square().sum().backward()
    checks = types.SimpleNamespace(
        torch=torch, module=module, p=types.SimpleNamespace(optimizer=cfg), ctx=types.SimpleNamespace(rank=2)
    )
    checks._lap = lambda part=None: None
    for name in ("_step_again", "_beyond_floor", "_described", "_gradients_since"):
        setattr(checks, name, types.MethodType(getattr(StepChecks, name), checks))
    checks._start = [t.detach().clone() for t in module.parameters()]
    checks._state = [None for _ in module.parameters()]
    checks._grads = [t.grad.detach().clone() for t in module.parameters()]
    return checks, module, optimizer


@pytest.mark.parametrize("what_moved", [None, "parameter", "gradient"])
def test_the_update_check_passes_a_true_step_and_names_which_input_moved(what_moved):
    """The optimizer check (StepChecks._update) on a real AdamW step of a small model: a step taken from the copied
    start, gradient and state passes; a parameter changed after the step fails with the gradients named unchanged;
    a gradient changed after its copy (so the step read another) fails with the gradients named changed, and the
    element's start, both gradients and both recomputations told."""
    from spmd.workloads.torch.checks import StepChecks

    checks, module, optimizer = _update_check(torch)
    if what_moved == "gradient":
        with torch.no_grad():
            module[2].weight.grad[1, 4] *= -1.0  # AdamW's first step moves by about lr times its sign
    optimizer.step()
    if what_moved == "parameter":
        with torch.no_grad():
            module[0].bias[2] += 1e-3
    result = StepChecks._update(checks, 4, optimizer)
    if what_moved is None:
        assert result == {"largest_difference": 0.0, "failure": None}
        return
    rank, message = result["failure"]
    assert rank == 2 and message.startswith("step 4: parameter ") and result["recomputed_twice"]
    if what_moved == "parameter":
        assert "parameter 0.bias element 2" in message and "1 of the tensor's 5 elements beyond it" in message
        assert message.endswith("the gradients on the parameters are still those copied after the allreduce")
    else:
        assert "parameter 2.weight element 9" in message  # row 1, column 4 of a 3x5 weight
        copied, now = checks._grads[2].reshape(-1)[9], module[2].weight.grad.reshape(-1)[9]
        assert f"the gradient {float(copied)!r} copied after the allreduce ({float(now)!r} on the parameter now)" in (
            message
        )
        assert f"started from {float(checks._start[2].reshape(-1)[9])!r}" in message
        assert message.endswith("no longer those copied after the allreduce (changed since)")


def test_the_update_check_takes_the_step_again_where_its_own_recomputation_moved():
    """A first recomputation that differs from the run (the check's own copy disturbed) is taken again from the same
    copies, which the first one leaves as they were: a second that agrees passes the step, the first's difference
    recorded; a run that differs from both fails, both recomputations told."""
    from spmd.workloads.torch.checks import FLOOR, StepChecks

    checks, module, optimizer = _update_check(torch, seed=5)
    optimizer.step()
    honest, taken = checks._step_again, []

    def disturbed_once():
        out = honest()
        if not taken:
            out[0] = out[0] + 1e-3  # the first recomputation's result moved, not the run's
        taken.append(out)
        return out

    checks._step_again = disturbed_once
    result = StepChecks._update(checks, 7, optimizer)
    assert result["failure"] is None and result["recomputed_twice"] and result["largest_difference"] == 0.0
    assert result["first_recomputation_difference"] > FLOOR and len(taken) == 2
    with torch.no_grad():
        module[0].weight[0, 0] += 1e-3  # now the run's parameter moved too: both recomputations differ from it
    taken.clear()
    rank, message = StepChecks._update(checks, 7, optimizer)["failure"]
    first, second = float(taken[0][0].reshape(-1)[0]), float(taken[1][0].reshape(-1)[0])
    assert first != second and f"the update taken twice gave {first!r} and {second!r}" in message


def test_the_report_lists_the_steps_whose_update_was_taken_again():
    """verification.parameters.taken_again: each rank's checked steps that passed on a second recomputation, with the
    first's difference; none where every step agreed the first time."""
    from spmd.workloads.torch.verify import taken_again

    plain = {"largest_difference": 0.0}
    again = {"largest_difference": 0.0, "recomputed_twice": True, "first_recomputation_difference": 3e-5}
    results = [[{"step": 0, "update": plain}, {"step": 5, "update": plain}], [{"step": 0, "update": plain}]]
    assert taken_again(results) == []
    results[1].append({"step": 5, "update": again})
    assert taken_again(results) == [{"rank": 1, "step": 5, "first_recomputation_difference": 3e-5}]

"""A sweep's builds reused (spmd.workloads.torch.user_model.reused_builds): a reused build is what a fresh one gives,
parameters, buffers and the random state after it alike, and a build is reused only by params that agree on every
key it read. The reference is the same build function called fresh, outside any reuse."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="workload torch needs PyTorch")

from spmd.workloads.plugins import load_object  # noqa: E402
from spmd.workloads.torch.params import TorchParams  # noqa: E402
from spmd.workloads.torch.user_model import ReadKeys, build_model, reused_builds  # noqa: E402

BUILDS = str(Path(__file__).parents[1] / "fixtures" / "torch_builds.py")


def calls() -> list[str]:
    return load_object(f"{BUILDS}:CALLS")


def params(name: str = "counted", **changes) -> TorchParams:
    return dataclasses.replace(TorchParams(model=f"{BUILDS}:{name}", options={"width": 4}), **changes)


def state(module) -> dict:
    return {k: v.clone() for k, v in module.state_dict().items()}


def same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), width=st.integers(1, 9), batches=st.lists(st.integers(1, 64), min_size=2))
def test_a_reused_build_is_a_fresh_build(seed, width, batches):
    fresh_states, fresh_rng = [], []
    for batch in batches:  # the reference: every build fresh
        p = params(seed=seed, batch=batch, options={"width": width})
        fresh_states.append(state(build_model(torch, p)))
        fresh_rng.append(torch.random.get_rng_state())
    calls().clear()
    with reused_builds():
        for batch, want, rng in zip(batches, fresh_states, fresh_rng):
            torch.manual_seed(seed + 1)  # what ran between the builds must not leak into the next
            module = build_model(torch, params(seed=seed, batch=batch, options={"width": width}))
            assert same_state(state(module), want)
            assert torch.equal(torch.random.get_rng_state(), rng)  # dropout's masks after it: as after a fresh build
            with torch.no_grad():
                module[0].weight.add_(1.0)  # trained: the next run's copy is untouched
    assert calls() == ["counted"]  # the batch is not read by this build: built once


def test_a_build_is_reused_only_by_params_that_agree_on_what_it_read():
    calls().clear()
    with reused_builds():
        for batch in (8, 8, 32, 32, 8):
            assert build_model(torch, params("by_batch", batch=batch)).in_features == batch
        build_model(torch, params("counted", options={"width": 4}))
        build_model(torch, params("counted", options={"width": 5}))  # options read: another build
        build_model(torch, params("counted", options={"width": 5}, seed=7))  # the seed is the build's too
        build_model(torch, params("reads_all"))
        build_model(torch, params("reads_all", steps=3))  # iterating read every key, steps among them
        build_model(torch, params("reads_all"))
    assert calls() == ["by_batch", "by_batch", "by_batch", "counted", "counted", "counted", *["reads_all"] * 3]


def test_a_module_that_cannot_be_copied_and_builds_outside_a_sweep_are_built_each_time():
    calls().clear()
    with reused_builds():
        build_model(torch, params("uncopyable"))
        build_model(torch, params("uncopyable"))
    build_model(torch, params("counted"))
    build_model(torch, params("counted"))
    assert calls() == ["uncopyable"] * 2 + ["counted"] * 2


def test_the_params_are_read_only_and_reading_is_noted():
    view = ReadKeys({"batch": 8, "options": {}, "steps": 20})
    assert view.get("batch") == 8 and "options" in view and view.get("absent") is None
    assert view.read == {"batch", "options", "absent"}
    with pytest.raises(TypeError):
        view["batch"] = 9  # type: ignore[index]
    list(view)
    assert view.read >= {"batch", "options", "steps"}

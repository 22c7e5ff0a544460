"""The one-process reference (spmd.workloads.torch.reference) under SyncBatchNorm: rank 0 runs it alone, so it holds
no SyncBatchNorm (one would wait in a collective no other rank enters; on 2 GPUs it did, until NCCL's watchdog ended
the job), and what stands in its place computes what a plain batch norm over the same rows computes."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="the reference needs PyTorch (the torch extra)")

from spmd.workloads.torch.reference import without_sync_batchnorm  # noqa: E402


def model(kind: str, affine: bool, track: bool):
    norm = {"1d": torch.nn.BatchNorm1d, "2d": torch.nn.BatchNorm2d}[kind]
    conv = torch.nn.Conv2d(3, 6, 3) if kind == "2d" else torch.nn.Linear(3, 6)
    inner = torch.nn.Sequential(norm(6, affine=affine, track_running_stats=track), torch.nn.ReLU())
    return torch.nn.Sequential(conv, norm(6, affine=affine, track_running_stats=track), inner)


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["1d", "2d"]),
    affine=st.booleans(),
    track=st.booleans(),
    rows=st.integers(2, 9),
    seed=st.integers(0, 2**31 - 1),
)
def test_no_sync_batchnorm_is_left_and_training_matches_plain_batch_norm(kind, affine, track, rows, seed):
    torch.manual_seed(seed)
    plain = model(kind, affine, track)
    synced = torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(plain))
    assert any(isinstance(m, torch.nn.SyncBatchNorm) for m in synced.modules())
    reference = without_sync_batchnorm(torch, synced)
    assert not any(isinstance(m, torch.nn.SyncBatchNorm) for m in reference.modules())
    x = torch.randn(rows, 3, *((5, 5) if kind == "2d" else ()))
    for net in (plain, reference):  # a training step's forward and backward on each
        net.train()
        net(x).square().sum().backward()
    assert torch.equal(plain(x), reference(x))
    for a, b in zip(plain.parameters(), reference.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad)
    for a, b in zip(plain.buffers(), reference.buffers(), strict=True):  # running statistics moved alike
        assert torch.equal(a, b)


def test_the_reference_shares_the_modules_parameters_and_buffers():
    """The swap keeps the start's own tensors: the optimizer built on the reference steps the same parameters."""
    synced = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model("1d", True, True))
    before = {id(t) for t in [*synced.parameters(), *synced.buffers()]}
    reference = without_sync_batchnorm(torch, synced)
    assert {id(t) for t in [*reference.parameters(), *reference.buffers()]} == before

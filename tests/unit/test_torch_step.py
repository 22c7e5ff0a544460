"""workload torch's Stepper in one process (gloo, world size 1): the marked steps alone go through the hooked twin
DDP, and training through the twin gives the parameters plain DDP gives, bit for bit."""

from __future__ import annotations

import dataclasses
import socket
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="workload torch needs the torch extra (make test installs it)")
dist = pytest.importorskip("torch.distributed")

from spmd.core import faults  # noqa: E402
from spmd.core.timing import PhaseTimer  # noqa: E402
from spmd.workloads.torch.params import TorchParams  # noqa: E402
from spmd.workloads.torch.step import Batches, Stepper  # noqa: E402


@pytest.fixture(scope="module")
def group():
    with socket.socket() as s:  # a free port for this process's store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", store=dist.TCPStore("127.0.0.1", port, 1, True), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def train(params: TorchParams, steps: int):
    """``steps`` steps of a small MLP; (its parameters, the stepper, how many hook calls it saw)."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((64, 6)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 64))
    batches = Batches(torch, x, y, "device", torch.device("cpu"), torch.float32, None)
    ctx = types.SimpleNamespace(device="cpu", rank=0, xp=np)
    stepper = Stepper(torch, ctx, params, module, torch.nn.functional.cross_entropy, batches, steps)
    calls = []  # per allreduce through the hook: whether its step was marked
    allreduce = stepper._allreduce
    stepper._allreduce = lambda state, bucket: calls.append(stepper.current is not None) or allreduce(state, bucket)
    stepper.load_window(rng.integers(0, 64, (steps, params.batch)))
    timer = PhaseTimer(np)
    timer.start_repeat()
    stepper.run_window(steps, timer)
    timer.end_repeat()
    stepper.timer = timer
    return [p.detach().clone() for p in module.parameters()], stepper, calls


def test_only_marked_steps_take_the_hooked_twin_and_training_is_unchanged(group):
    base = TorchParams(model="m.py:build", batch=8, steps=16, phase_every=8)
    plain, _, plain_calls = train(dataclasses.replace(base, phases=False), 16)
    twin, stepper, calls = train(base, 16)
    assert stepper.marked_ddp is not stepper.ddp
    assert plain_calls == []
    assert calls == [True, True]  # one bucket, on steps 8 and 16 only; never an unmarked step
    assert stepper.timeline() is not None
    # the two marked steps drawn on the repeat's timeline, in order, inside the repeat
    spans = stepper.timer.timeline[0].spans
    assert [name for name, *_ in spans if name in ("forward", "allreduce")] == ["forward", "allreduce"] * 2
    total = stepper.timer.records[0]["total"]
    assert all(0 <= a <= b <= total for _, _, a, b in spans)
    assert {track for _, track, *_ in spans} == {"host", "comm", "repeats"}
    for a, b in zip(plain, twin):
        assert torch.equal(a, b)


def test_a_corrupt_fault_anywhere_keeps_one_hooked_ddp_on_every_rank(group):
    faults.arm(faults.parse_fault("rank=1,phase=backward,kind=corrupt"), rank=0, host="here")  # armed elsewhere
    try:
        _, stepper, calls = train(TorchParams(model="m.py:build", batch=8, steps=8, phase_every=8), 8)
    finally:
        faults.disarm()
    assert stepper.marked_ddp is stepper.ddp  # every rank makes the same DDPs (their construction is collective)
    assert calls == [False] * 7 + [True]  # the fault's hook runs on every step


def test_the_window_losses_are_each_steps_loss_in_order(group):
    from spmd.workloads.torch.step import make_optimizer

    params = TorchParams(model="m.py:build", batch=8, steps=6, phases=False)
    _, stepper, _ = train(params, 6)
    got = stepper.window_losses(6)
    # the same six steps by hand (train()'s seed, data and rows), one loss read per step
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((64, 6)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 64))
    optimizer = make_optimizer(torch, params.optimizer, module.parameters())
    want = []
    for rows in torch.from_numpy(rng.integers(0, 64, (6, 8))):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(module(x[rows]), y[rows])
        loss.backward()
        optimizer.step()
        want.append(loss.item())
    assert len(got) == 6 and len(set(want)) == 6
    np.testing.assert_allclose(got, want, rtol=1e-6)
    stepper.load_window(np.zeros((6, 8), dtype=np.int64))
    assert stepper.step_losses == []  # a new window starts empty

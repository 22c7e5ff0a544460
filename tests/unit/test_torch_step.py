"""workload torch's Trainer in one process (gloo, world size 1): the marked steps alone go through the hooked twin
DDP, and training through the twin gives the parameters plain DDP gives, bit for bit; the steps verification
compares element by element run with deterministic kernels in the run and in the reference alike."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import time
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="workload torch needs the torch extra (make test installs it)")
dist = pytest.importorskip("torch.distributed")

from spmd.core import faults  # noqa: E402
from spmd.core.timing import PhaseTimer  # noqa: E402
from spmd.workloads.torch import reference as reference_module  # noqa: E402
from spmd.workloads.torch import step as step_module  # noqa: E402
from spmd.workloads.torch.params import TorchParams  # noqa: E402
from spmd.workloads.torch.reference import Reference  # noqa: E402
from spmd.workloads.torch.step import Batches, Trainer  # noqa: E402
from spmd.workloads.torch.workload import TorchWorkload  # noqa: E402


@pytest.fixture(scope="module")
def group():
    with socket.socket() as s:  # a free port for this process's store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", store=dist.TCPStore("127.0.0.1", port, 1, True), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def train(params: TorchParams, steps: int, plan: list[bool] | None = None, middle=None, **options):
    """``steps`` steps of a small MLP (``middle``: a layer between its two); (its parameters, the trainer, how many
    hook calls it saw)."""
    torch.manual_seed(0)
    inner = [middle] if middle is not None else []
    module = torch.nn.Sequential(torch.nn.Linear(6, 8), *inner, torch.nn.ReLU(), torch.nn.Linear(8, 3))
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((64, 6)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 64))
    batches = Batches(torch, x, y, "device", torch.device("cpu"), torch.float32, None)
    ctx = types.SimpleNamespace(device="cpu", rank=0, xp=np)
    plan = plan or [False] * steps
    trainer = Trainer(torch, ctx, params, module, torch.nn.functional.cross_entropy, batches, len(plan), **options)
    calls = []  # per allreduce through the hook: whether its step was marked
    allreduce = trainer._allreduce
    trainer._allreduce = lambda state, bucket: calls.append(trainer.current is not None) or allreduce(state, bucket)
    trainer.load_window(rng.integers(0, 64, (len(plan), params.batch)))
    timer = PhaseTimer(np)
    timer.start_repeat()
    trainer.run_window(plan, timer)
    timer.end_repeat()
    trainer.timer = timer
    return [p.detach().clone() for p in module.parameters()], trainer, calls


def test_only_marked_steps_take_the_hooked_twin_and_training_is_unchanged(group):
    base = TorchParams(model="m.py:build", batch=8, steps=16, phase_every=8)
    plain, _, plain_calls = train(dataclasses.replace(base, phases=False), 16)
    twin, trainer, calls = train(base, 16)
    assert trainer.marked_ddp is not trainer.ddp
    assert plain_calls == []
    assert calls == [True, True]  # one bucket, on steps 8 and 16 only; never an unmarked step
    assert trainer.timeline() is not None
    # the two marked steps drawn on the repeat's timeline, in order, inside the repeat
    spans = trainer.timer.timeline[0].spans
    assert [name for name, *_ in spans if name in ("forward", "allreduce")] == ["forward", "allreduce"] * 2
    total = trainer.timer.records[0]["total"]
    assert all(0 <= a <= b <= total for _, _, a, b in spans)
    assert {track for _, track, *_ in spans} == {"host", "comm", "repeats"}
    for a, b in zip(plain, twin):
        assert torch.equal(a, b)


def test_a_corrupt_fault_anywhere_keeps_one_hooked_ddp_on_every_rank(group):
    faults.arm(faults.parse_fault("rank=1,phase=backward,kind=corrupt"), rank=0, host="here")  # armed elsewhere
    try:
        _, trainer, calls = train(TorchParams(model="m.py:build", batch=8, steps=8, phase_every=8), 8)
    finally:
        faults.disarm()
    assert trainer.marked_ddp is trainer.ddp  # every rank makes the same DDPs (their construction is collective)
    assert calls == [False] * 7 + [True]  # the fault's hook runs on every step


def test_the_window_losses_are_each_steps_loss_in_order(group):
    from spmd.workloads.torch.compute import make_optimizer

    params = TorchParams(model="m.py:build", batch=8, steps=6, phases=False)
    _, trainer, _ = train(params, 6)
    got = trainer.window_losses(6)
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
    trainer.load_window(np.zeros((6, 8), dtype=np.int64))
    assert trainer.step_losses == []  # a new window starts empty


def inside_deterministic(monkeypatch, module) -> dict:
    """``module.deterministic`` replaced by one that says, in the returned dict's ``inside``, whether a step is in
    it."""
    state = {"inside": False}

    @contextlib.contextmanager
    def deterministic(torch_, gpu):
        state["inside"] = True
        try:
            yield
        finally:
            state["inside"] = False

    monkeypatch.setattr(module, "deterministic", deterministic)
    return state


@pytest.mark.parametrize(
    "options, plan, expected",
    [
        ({}, [False] * 4, [False] * 4),
        ({"first_exact": True}, [False] * 4, [True, False, False, False]),
        ({"checks": "slow"}, [True, False, True, False, False], [True, False, True, False, False]),
    ],
)
def test_the_steps_verification_compares_take_deterministic_kernels(group, monkeypatch, options, plan, expected):
    """The checked steps (and, where the first step's averaged gradient is compared instead, the first) run with
    deterministic kernels, eagerly through DDP itself; the rest compiled as asked."""
    state, seen = inside_deterministic(monkeypatch, step_module), []
    original = Trainer._micro_batches

    def micro_batches(self, forward, ddp, mark, rows_all):
        seen.append((state["inside"], forward is self.ddp or forward is self.marked_ddp))
        return original(self, forward, ddp, mark, rows_all)

    monkeypatch.setattr(Trainer, "_micro_batches", micro_batches)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    params = TorchParams(model="m.py:build", batch=8, steps=4, phases=False, strategy="compile")
    if options.get("checks") == "slow":
        options = {"checks": SlowChecks()}
    train(params, 4, plan=plan, **options)
    assert seen == [(e, e) for e in expected]


def test_the_reference_runs_the_runs_deterministic_steps_alike(monkeypatch):
    state, seen = inside_deterministic(monkeypatch, reference_module), []
    original = Reference._step_gradients

    def step_gradients(self, rows, step, reverse):
        seen.append((step, state["inside"]))
        return original(self, rows, step, reverse)

    monkeypatch.setattr(Reference, "_step_gradients", step_gradients)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((64, 6)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 3, 64))
    params = TorchParams(model="m.py:build", batch=4, steps=3)
    loss = torch.nn.functional.cross_entropy
    ref = Reference(torch, params, module, loss, None, x, y, "cpu", torch.float32, 2, False, False, 1)
    rows = rng.integers(0, 64, (3, 8))
    ref.train(lambda first, steps: rows[first : first + steps], 0, 3)
    assert seen == [(0, True), (1, False), (2, False)] and ref.first_grads is not None


@pytest.mark.parametrize(
    "verify, strategy, sync_bn, first, per_repeat, runs, ranks, first_step",
    [
        ("auto", "ddp", False, 2, 1, True, True, False),
        ("auto", "ddp", False, 0, 0, False, False, True),
        ("full", "compile", False, 0, 1, True, True, False),
        ("auto", "ddp", True, 2, 1, True, False, True),
        ("auto", "ddp-graph", False, 2, 1, False, False, True),
        ("none", "ddp", False, 2, 1, False, False, False),
    ],
)
def test_which_checks_a_run_makes(verify, strategy, sync_bn, first, per_repeat, runs, ranks, first_step):
    """Steps checked as they run, except under ddp-graph (no Python in a replay) or with none asked; each rank's
    gradient there, except under SyncBatchNorm; where no rank's gradient is checked, the first step's averaged one."""
    p = types.SimpleNamespace(
        strategy=strategy, sync_batchnorm=sync_bn, verify_steps=first, verify_per_repeat=per_repeat
    )
    w = types.SimpleNamespace(cfg=types.SimpleNamespace(verify=verify), params=p)
    w.checks_run = TorchWorkload.checks_run.fget(w)
    w.ranks_checked = TorchWorkload.ranks_checked.fget(w)
    assert (w.checks_run, w.ranks_checked, TorchWorkload.first_step_checked.fget(w)) == (runs, ranks, first_step)


class SlowChecks:
    """Verification's side of a checked step, as the Trainer calls it, taking 0.3 s at its end."""

    ranks_checked = False

    def __init__(self):
        self.steps = []

    def begin(self, optimizer):
        pass

    def before_update(self):
        pass

    def end(self, step, captured, optimizer):
        self.steps.append(step)
        time.sleep(0.3)


def test_checked_steps_train_but_stay_out_of_the_timing(group):
    """A window of 10 steps, 2 of them checked: the checks' 0.6 s is not in the repeat's total, which is its 8 timed
    steps' time scaled to the 10; the checked steps are steps of the training (10 taken), and the marked phases
    stand for the window's steps, never beyond its total."""
    base = TorchParams(model="m.py:build", batch=8, steps=10, phase_every=4)
    checks = SlowChecks()
    plan = [True, False, False, False, True, False, False, False, False, False]
    _, trainer, _ = train(base, 10, plan=plan, checks=checks)
    assert checks.steps == [0, 4] and trainer.step == 10
    total = trainer.timer.records[0]["total"]
    assert total < 0.3, total
    assert total >= 10 * trainer.step_seconds  # the 8 timed steps' rate, for 10 (unscaled: 8 steps' time)
    assert trainer.timer.records[0]["step"] <= total


@pytest.mark.parametrize("plan", [[False] * 4, [True, False, False, False, False]])
def test_the_first_steps_averaged_gradient_is_kept_whether_or_not_that_step_is_checked(group, monkeypatch, plan):
    """SyncBatchNorm checks its updates at the checked steps (step 0 among them) and its first step's averaged
    gradient against the reference: that gradient must be kept either way (it was lost when step 0 was checked)."""
    monkeypatch.setattr(time, "sleep", lambda s: None)
    params = TorchParams(model="m.py:build", batch=8, steps=4, phases=False)
    checks = SlowChecks() if plan[0] else None
    _, trainer, _ = train(params, 4, plan=plan, checks=checks, first_exact=True)
    assert trainer.first_grads and all(t.abs().sum() > 0 for t in trainer.first_grads.values())


def _marks(times: dict[str, float], micro: int = 1):
    from spmd.workloads.torch.phases import StepMarks

    marks = StepMarks(torch, False, micro)
    marks.t = dict(times)
    return marks


def test_the_buffers_broadcast_is_its_own_phase_taken_out_of_forward():
    # s=0, batch on the device at 1, DDP's forward called at 3 (host work before it: 2), the module's own forward
    # from 7 (DDP broadcast the buffers: 4), loss at 10, backward done at 15, optimizer done at 16
    times = {"s": 0.0, "d0": 1.0, "a0": 3.0, "m0": 7.0, "f0": 10.0, "b0": 15.0, "o": 16.0}
    phases = _marks(times).phases()
    assert phases["comm_buffers"] == 4.0
    assert phases["forward"] == 9.0 - 4.0  # its host work before DDP's forward and its own forward
    assert phases["data"] == 1.0 and phases["step"] == 16.0
    drawn = _marks(times).drawn()
    assert ("buffers broadcast", "comm", 3.0, 7.0) in drawn
    # no module mark (a compiled forward): nothing is taken out of forward
    del times["m0"]
    phases = _marks(times).phases()
    assert phases["comm_buffers"] == 0.0 and phases["forward"] == 9.0
    assert not [d for d in _marks(times).drawn() if d[0] == "buffers broadcast"]


def test_syncbatchnorm_layers_forwards_are_their_own_phase_taken_out_of_forward_on_device_and_host():
    """Two SyncBatchNorm layers in a forward from 3 to 10, their forwards 4-5 and 7-9 (each gathers every rank's
    statistics: an early rank waits there): comm_syncbn 3, forward the rest; the host side of forward leaves out the
    host's own time in them (it read the gathered counts back, waiting for the last rank); drawn on the timeline."""
    from spmd.workloads.torch.phases import StepMarks

    times = {"s": 0.0, "d0": 1.0, "a0": 3.0, "f0": 10.0, "b0": 15.0, "o": 16.0}
    marks = StepMarks(torch, False, 1, syncbn=True)
    marks.t = dict(times)
    marks.layers = [[4.0, 5.0], [7.0, 9.0]]
    marks.layers_host = [[4.0, 5.0], [7.0, 9.0]]
    phases = marks.phases()
    assert phases["comm_syncbn"] == 3.0 and phases["forward"] == 9.0 - 3.0
    assert marks.host_phases()["forward"] == 9.0 - 3.0
    assert ("SyncBatchNorm gather", "host", 7.0, 9.0) in marks.drawn()
    assert "comm_syncbn" not in _marks(times).phases()  # a model without the layers has no such phase


def test_a_marked_step_times_each_syncbatchnorm_layers_forward_as_comm(group, monkeypatch):
    """The trainer marks around every SyncBatchNorm layer (on a CPU DDP refuses the layer and its forward cannot
    run: that check is passed by, and a sleep stands in for the gather's wait): the sleeps land in comm_syncbn and
    comm, not in forward."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    monkeypatch.setattr(DDP, "_passing_sync_batchnorm_handle", lambda self, module: None)
    monkeypatch.setattr(
        torch.nn.SyncBatchNorm, "forward", lambda self, x: (time.sleep(0.02), x * self.weight + self.bias)[1]
    )
    base = TorchParams(model="m.py:build", batch=8, steps=4, phase_every=2)
    _, trainer, _ = train(base, 4, middle=torch.nn.SyncBatchNorm(8))
    record = trainer.timer.records[0]
    assert trainer.syncbn and record["comm_syncbn"] >= 0.06 and record["comm"] >= record["comm_syncbn"]
    assert record["forward"] < record["comm_syncbn"] / 2
    _, plain, _ = train(base, 4)
    assert not plain.syncbn and "comm_syncbn" not in plain.timer.records[0]


def test_the_host_side_of_each_phase_sums_its_micro_batches():
    """Two micro-batches: data from the step's start (then from the first backward's end) to the batch on the
    device, forward to the loss, backward to its return, the optimizer after the last."""
    times = {"s": 0.0, "d0": 1.0, "a0": 1.5, "f0": 3.0, "b0": 6.0, "d1": 6.5, "a1": 7.0, "f1": 8.0, "b1": 12.0}
    host = _marks({**times, "o": 13.0}, micro=2).host_phases()
    assert host == {"data": 1.0 + 0.5, "forward": 2.0 + 1.5, "backward": 3.0 + 4.0, "optimizer": 1.0}


def test_a_marked_step_of_a_model_with_buffers_times_ddps_broadcast(group, monkeypatch):
    """The module's forward pre-hook marks where DDP's forward handed over to the module: a delay inside DDP's
    pre-forward (where it broadcasts the buffers) lands in comm_buffers and comm, not in forward."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    pre_forward = DDP._pre_forward

    def slow_pre_forward(self, *args, **kwargs):
        time.sleep(0.02)
        return pre_forward(self, *args, **kwargs)

    monkeypatch.setattr(DDP, "_pre_forward", slow_pre_forward)
    base = TorchParams(model="m.py:build", batch=8, steps=4, phase_every=2)
    _, trainer, _ = train(base, 4)
    record = trainer.timer.records[0]
    # 2 marked steps of 4, scaled to the window's 4: about 4 x 20 ms (the scale is capped at the window's wall time)
    assert record["comm_buffers"] >= 0.06 and record["comm"] >= record["comm_buffers"]
    assert record["forward"] < record["comm_buffers"] / 2  # the sleeps are not in it
    assert record["compute"] == pytest.approx(record["step"] - record["comm"], abs=1e-9)

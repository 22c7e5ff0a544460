"""A slow rank named right when DDP couples the ranks inside the step: a model of the user's own with BatchNorm,
whose buffers DDP broadcasts from rank 0 before every forward, so a rank late before its forward makes the others
wait in that broadcast (inside their forward), not in the gradients' allreduce. Rank 1 slowed before its forward
(its data, its host before the forward), in its forward (the model's own), on 2 CPU ranks (gloo), with and without
``--capture 2``: rank 1 named every time, rank 0 never; a clean twin names no straggler."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch", reason="workload torch needs the torch extra (make test installs it)")

from helpers import torch_user_config  # noqa: E402
from mpi_job import spmd  # noqa: E402

BN_MODEL = '''
import time

import torch
from torch import nn


class Net(nn.Module):
    """Two layers with BatchNorm between them; ``slow`` seconds of sleep inside the forward of rank ``slow_rank``."""

    def __init__(self, features, hidden, classes, slow_rank, slow):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.norm = nn.BatchNorm1d(hidden)
        self.out = nn.Linear(hidden, classes)
        self.slow = slow if torch.distributed.get_rank() == slow_rank else 0.0

    def forward(self, x):
        h = torch.relu(self.norm(self.inp(x)))
        if self.slow and self.training and torch.is_grad_enabled():
            time.sleep(self.slow)
        return self.out(h)


def make(params):
    o = params["options"]
    return Net(o["features"], 32, o["classes"], o.get("slow_rank", -1), o.get("slow", 0.0))
'''

SLOW = 0.05  # seconds a step: several times a clean step of this model on a CPU


def run(tmp_path, capture: bool, fault: str | None = None, in_forward: bool = False):
    (tmp_path / "bn.py").write_text(BN_MODEL)
    options = {"features": 12, "classes": 4, **({"slow_rank": 1, "slow": SLOW} if in_forward else {})}
    path = torch_user_config(tmp_path, save=None, steps=8, batch=64, model="bn.py:make", options=options)
    args = ["--capture", "2"] if capture else []
    env = {"SPMD_FAULT": fault} if fault else None
    rc, out, err, _ = spmd("run", path, "-o", "repeats=3", *args, ranks=2, cwd=tmp_path, env=env)
    assert rc == 0, err
    return json.loads((tmp_path / "out/report.json").read_text())


CASES = {
    "data": dict(fault=f"rank=1,phase=data,kind=slow,seconds={SLOW}"),
    "host before forward": dict(fault=f"rank=1,phase=compute,kind=slow,seconds={SLOW}"),
    "in forward": dict(in_forward=True),
}


@pytest.mark.parametrize("capture", [False, True], ids=["phases", "capture"])
@pytest.mark.parametrize("where", list(CASES))
def test_rank_1_slow_is_named_wherever_its_slowness_sits(tmp_path, where, capture):
    report = run(tmp_path, capture, **CASES[where])
    s = report["breakdown"]["straggler"]
    assert s is not None and s["rank"] == 1, (s, report["findings"])
    assert report["findings"][0].startswith("Rank 1 on "), report["findings"]
    assert not any("Rank 0 on" in f or "rank 0 at" in f for f in report["findings"]), report["findings"]


@pytest.mark.parametrize("capture", [False, True], ids=["phases", "capture"])
def test_a_clean_twin_names_no_straggler(tmp_path, capture):
    report = run(tmp_path, capture)
    assert report["breakdown"]["straggler"] is None, report["findings"]

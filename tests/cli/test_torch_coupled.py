"""A slow rank named right when DDP couples the ranks inside the step: a model of the user's own with BatchNorm,
whose buffers DDP broadcasts from rank 0 before every forward, so a rank late before its forward makes the others
wait in that broadcast (inside their forward), not in the gradients' allreduce. Rank 1 slowed before its forward
(its data, its host before the forward), in its forward (the model's own), on 2 CPU ranks (gloo), with and without
``--capture 2``: rank 1 named every time, rank 0 never; a clean twin names no straggler."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch", reason="workload torch needs the torch extra (make test installs it)")

from helpers import TORCH_BN_MODEL, torch_user_config  # noqa: E402
from mpi_job import spmd  # noqa: E402

SLOW = 0.05  # seconds a step: several times a clean step of this model on a CPU


def run(tmp_path, capture: bool, fault: str | None = None, inside: str | None = None, repeats: int = 3):
    (tmp_path / "bn.py").write_text(TORCH_BN_MODEL)
    options = {"features": 12, "classes": 4, **({"slow_rank": 1, "slow": SLOW, "where": inside} if inside else {})}
    path = torch_user_config(tmp_path, save=None, steps=8, batch=64, model="bn.py:make", options=options)
    args = ["--capture", "2"] if capture else []
    env = {"SPMD_FAULT": fault} if fault else None
    rc, out, err, _ = spmd("run", path, "-o", f"repeats={repeats}", *args, ranks=2, cwd=tmp_path, env=env)
    assert rc == 0, err
    return json.loads((tmp_path / "out/report.json").read_text())


# where rank 1 is slow -> how it is made, and the phase of its own the finding names
CASES = {
    "data": (dict(fault=f"rank=1,phase=data,kind=slow,seconds={SLOW}"), "data"),
    "host before forward": (dict(fault=f"rank=1,phase=compute,kind=slow,seconds={SLOW}"), "forward"),
    "previous optimizer step": (dict(fault=f"rank=1,phase=optimizer,kind=slow,seconds={SLOW}"), "optimizer"),
    "in forward": (dict(inside="forward"), "forward"),
    "in backward": (dict(inside="backward"), "backward"),
}


@pytest.mark.parametrize("capture", [False, True], ids=["phases", "capture"])
@pytest.mark.parametrize("where", list(CASES))
def test_rank_1_slow_is_named_wherever_its_slowness_sits(tmp_path, where, capture):
    how, phase = CASES[where]
    report = run(tmp_path, capture, **how)
    s = report["breakdown"]["straggler"]
    assert s is not None and s["rank"] == 1, (s, report["findings"])
    assert s["phase"] == phase, s
    assert report["findings"][0].startswith("Rank 1 on "), report["findings"]
    assert not any("Rank 0 on" in f or "rank 0 at" in f for f in report["findings"]), report["findings"]


@pytest.mark.parametrize("capture", [False, True], ids=["phases", "capture"])
def test_a_clean_twin_names_no_straggler(tmp_path, capture):
    """Six repeats, so the others' wait is held at 95% over all six: a repeat of this model takes tens of
    milliseconds, and three repeats let one burst of the machine's own on one rank's core name it in a clean CI launch
    (really late there, but not what this tests)."""
    report = run(tmp_path, capture, repeats=6)
    assert report["breakdown"]["straggler"] is None, report["findings"]

"""report.json's ``kernels`` (spmd.report.capture.kernels): every key spmd writes there is named in docs/report.md's
row, for a GPU capture (the committed fixtures) and a CPU one (a hand-made trace).

spmd's kernel breakdown, computed by spmd, against Holistic Trace Analysis on the same real GPU traces
(tests/fixtures/traces, GPT-2 and ResNet-50 captured by spmd on 2 H200s). HTA's temporal breakdown (over the whole
capture: idle, compute, non-compute) and its idle-time breakdown (per stream: host wait, kernel wait, other) agree
with spmd's category by category within max(10% of the category, 1% of a step).

Where they differed before, the cause is HTA's handling of nanosecond traces (PyTorch PR 122425): it moves every
event's start up to the next whole microsecond and its end down to the previous one (``round_down_time_stamps``),
so each of the ~1,500 GPU events of a step loses about 1 us and the shortest vanish; compute shrank by 7-19% and
idle grew. Not a rounding of spmd's. So the comparison is made both ways: HTA with that rounding off
(``HTA_DISABLE_NS_ROUNDING=1``) against spmd as it is, and HTA as shipped against spmd over the same events rounded
inward as HTA does. Under CI=true HTA must be installed (make test installs it with the hta extra); elsewhere the
comparison skips, saying so."""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import re
import warnings
from pathlib import Path

import pytest

from spmd.report.capture import causes, kernels

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests/fixtures/traces"
FIXTURE = TRACES / "analyses/resnet-r2-work.json"

RUNS = ("gpt2-r2", "resnet-r2-work")

WAYS = ("hta-unrounded", "both-rounded-inward")


def within(ours: float, theirs: float, step: float, steps: int) -> bool:
    """The issue's tolerance: max(10% of the category, 1% of a step), the category summed over ``steps`` steps."""
    return abs(ours - theirs) <= max(0.10 * abs(theirs), 0.01 * step * steps)


def rounded_inward(trace: dict) -> dict:
    """Every complete event as HTA reads a nanosecond trace: start up to the next whole us, end down to the last."""
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and isinstance(e.get("ts"), float) and "dur" in e:
            end = e["ts"] + e["dur"]
            e["ts"] = math.ceil(e["ts"])
            e["dur"] = math.floor(end) - e["ts"]
    return trace


def _hta():
    if os.environ.get("CI") == "true":
        from hta.trace_analysis import TraceAnalysis  # CI=true: HTA must be there (make test installs it)
    else:
        TraceAnalysis = pytest.importorskip(
            "hta.trace_analysis", reason="Holistic Trace Analysis not installed (make test installs it)"
        ).TraceAnalysis
    return TraceAnalysis


@pytest.fixture(scope="module", params=[(r, w) for r in RUNS for w in WAYS], ids=lambda p: f"{p[0]}-{p[1]}")
def run(request):
    TraceAnalysis = _hta()
    name, way = request.param
    folder = TRACES / name
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as env:
        warnings.simplefilter("ignore")
        if way == "hta-unrounded":
            env.setenv("HTA_DISABLE_NS_ROUNDING", "1")
        logging.disable(logging.WARNING)
        try:
            hta = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)
            temporal = hta.get_temporal_breakdown(visualize=False)
            idle, _ = hta.get_idle_time_breakdown(ranks=[0, 1], visualize=False)
        finally:
            logging.disable(logging.NOTSET)
    traces = [json.load(gzip.open(folder / f"rank{r}.trace.json.gz")) for r in (0, 1)]
    if way == "both-rounded-inward":
        traces = [rounded_inward(t) for t in traces]
    return temporal, idle, [kernels.analyze(t, gpu=True) for t in traces]


def test_the_temporal_breakdown_agrees_with_htas(run):
    temporal, _, ours = run
    for r, mine in enumerate(ours):
        theirs = temporal[temporal["rank"] == r].iloc[0]
        step = mine["temporal"]["span_us"] / mine["steps"]
        assert abs(mine["temporal"]["span_us"] - theirs["kernel_time(us)"]) < 0.005 * step
        for ours_key, hta_key in (
            ("idle_us", "idle_time(us)"),
            ("compute_us", "compute_time(us)"),
            ("non_compute_us", "non_compute_time(us)"),
        ):
            assert within(mine["temporal"][ours_key], theirs[hta_key], step, mine["steps"]), (
                r,
                ours_key,
                mine["temporal"][ours_key],
                theirs[hta_key],
            )


def test_the_idle_time_breakdown_agrees_with_htas_stream_by_stream(run):
    _, idle, ours = run
    names = {"host_wait": "host", "kernel_wait": "launch", "other": "other"}
    compared = 0
    for _, row in idle.iterrows():
        mine = ours[int(row["rank"])]
        step = mine["temporal"]["span_us"] / mine["steps"]
        value = mine["idle_by_stream"][str(int(row["stream"]))][names[row["idle_category"]]]
        assert within(value, row["idle_time"], step, mine["steps"]), (row.to_dict(), value)
        compared += 1
    assert compared >= 8  # two streams (compute, NCCL) a rank, three categories but absent zeros


def test_what_hta_cannot_say_adds_up(run):
    """Per step the busy union and the idle split tile the step; each kind's union fits in the busy time; the
    captured step's NCCL kernels are the collectives the other rank ran too."""
    _, _, ours = run
    for mine in ours:
        for s in mine["per_step"]:
            assert s["busy_us"] + s["idle_us"] == pytest.approx(s["span_us"])
            assert sum(s["idle"].values()) == pytest.approx(s["idle_us"])
            for kind in ("compute_us", "comm_us", "memory_us"):
                assert 0 <= s[kind] <= s["busy_us"] + 1e-6
            assert s["overlapped_comm_us"] <= s["comm_us"] + 1e-6
            assert s["kernels"] > 1000 and s["launches"] > 900  # real models: about a thousand launches a step
    counts = [[len(s["comm_kernels"]) for s in m["per_step"]] for m in ours]
    assert counts[0] == counts[1] and counts[0][0] >= 6


def test_the_gap_without_the_same_rounding_is_htas_inward_rounding():
    """HTA as shipped against spmd over the events as recorded: compute differs by more than the tolerance (the
    gaps the issue found), and by about a microsecond for each compute kernel: what the inward rounding takes."""
    TraceAnalysis = _hta()
    folder = TRACES / "gpt2-r2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            temporal = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True).get_temporal_breakdown(
                visualize=False
            )
        finally:
            logging.disable(logging.NOTSET)
    trace = json.load(gzip.open(folder / "rank0.trace.json.gz"))
    mine = kernels.analyze(trace, gpu=True)
    theirs = temporal[temporal["rank"] == 0].iloc[0]["compute_time(us)"]
    step = mine["temporal"]["span_us"] / mine["steps"]
    assert not within(mine["temporal"]["compute_us"], theirs, step, mine["steps"])
    computed = sum(1 for e in trace["traceEvents"] if e.get("cat") == "kernel" and kernels.kind(e["name"]) == "compute")
    assert 0.5 * computed < mine["temporal"]["compute_us"] - theirs < 1.5 * computed


# report.json's kernels against docs/report.md's row


def documented() -> set[str]:
    row = next(line for line in (ROOT / "docs/report.md").read_text().splitlines() if line.startswith("| `kernels`"))
    return set(re.findall(r"`([a-z_]+)`", row))


def keys(value, out: set[str]) -> set[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if not k.isdigit():  # a stream's number in idle_by_stream
                out.add(k)
            keys(v, out)
    elif isinstance(value, list):
        for v in value:
            keys(v, out)
    return out


def test_every_key_of_a_gpu_capture_is_documented():
    x = json.loads(FIXTURE.read_text())
    for a in x["analyses"]:
        a["capture"] = {"steps": 2, "seconds_per_step": 0.1, "trace_bytes": 1, "kept": True}
    k = causes.combine(x["analyses"], x["records"], x["steps_per_repeat"])
    # per_step and names stay on the ranks (the critical path and causes read them); report.json keeps the rest
    missing = keys(k, set()) - documented() - {"device", "steps", "rank", "name", "count", "kind"}
    assert not missing, f"report.json kernels keys not in docs/report.md: {sorted(missing)}"
    assert "per_step" not in k["per_rank"][0] and "names" not in k["per_rank"][0]


def test_a_cpu_capture_writes_the_same_keys():
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0.0, "dur": 100.0, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10.0, "dur": 30.0, "tid": 1},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "ts": 50.0, "dur": 20.0, "tid": 2},
    ]
    a = kernels.analyze({"traceEvents": ev}, gpu=False)
    assert a["device"] == "cpu" and a["median"]["busy_us"] == 30.0 and a["median"]["comm_us"] == 20.0
    assert a["per_step"][0]["comm_kernels"] == [20.0] and a["median"]["idle"]["other"] == 70.0
    gpu = json.loads(FIXTURE.read_text())["analyses"][0]
    assert set(a) | {"temporal", "idle_by_stream"} == set(gpu)

"""PhaseTimer's timeline and NVTX ranges on the CPU: each phase where it ran, a slow fault counted inside its phase,
and every phase and repeat pushed and popped in NVTX's nesting order."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from spmd.core import faults
from spmd.core.annotate import nvtx_ranges
from spmd.core.errors import ConfigError
from spmd.core.timing import PhaseTimer


class Recorder:
    """Stands in for spmd.core.annotate.Ranges: what was pushed and popped, in order."""

    def __init__(self):
        self.calls = []

    def push(self, name):
        self.calls.append(("push", name))

    def pop(self):
        self.calls.append(("pop",))


def test_phases_lie_in_order_inside_their_repeat_and_match_their_seconds():
    timer = PhaseTimer(np)
    for warm in (True, False):
        timer.start_repeat(warmup=warm)
        with timer.host_phase("read"):
            time.sleep(0.01)
        with timer.phase("compute"):
            time.sleep(0.005)
        with timer.host_phase("read"):  # a phase entered twice: two spans, one sum
            time.sleep(0.002)
        timer.place("marked step", 0.001, 0.002, "comm")
        timer.end_repeat(record=not warm)
    assert len(timer.records) == 1 and len(timer.warmup_records) == 1
    repeat = timer.timeline[1]
    assert not repeat.warmup and timer.timeline[0].warmup
    names = [name for name, *_ in repeat.spans]
    assert names == ["read", "compute", "read", "marked step", "repeat"]
    reads = [(a, b) for name, _, a, b in repeat.spans if name == "read"]
    assert sum(b - a for a, b in reads) == pytest.approx(timer.records[0]["read"], abs=1e-9)
    ordered = [s for s in repeat.spans if s[1] == "host"]
    assert all(x[3] <= y[2] for x, y in zip(ordered, ordered[1:]))
    name, track, start, end = repeat.spans[-1]
    assert (name, track, start) == ("repeat", "repeats", 0.0) and end == pytest.approx(
        timer.records[0]["total"], abs=1e-4
    )


def test_the_outline_holds_a_repeats_work_when_part_of_it_is_taken_out_of_the_total():
    """A checked step is done inside the repeat but untimed: the total leaves it out, and the outline still
    covers every span drawn in the repeat, the ones after it too."""
    timer = PhaseTimer(np)
    timer.start_repeat()
    with timer.host_phase("read"):
        time.sleep(0.002)
    time.sleep(0.03)  # a checked step
    timer.exclude(0.03)
    with timer.host_phase("compute"):
        time.sleep(0.002)
    timer.end_repeat()
    *spans, outline = timer.timeline[0].spans
    assert outline[0] == "repeat" and timer.records[0]["total"] < 0.02 < outline[3]
    assert all(end <= outline[3] for *_, end in spans)


def test_a_slow_fault_is_counted_inside_the_phase_it_delays():
    faults.arm(faults.parse_fault("rank=0,phase=read,kind=slow,seconds=0.05"), 0, "here")
    try:
        timer = PhaseTimer(np)
        timer.start_repeat()
        with timer.host_phase("read"):
            pass
        times = timer.end_repeat()
    finally:
        faults.disarm()
    assert times["read"] >= 0.05


def test_nvtx_ranges_nest_a_repeat_around_its_phases():
    rec = Recorder()
    timer = PhaseTimer(np, rec)
    timer.start_repeat(warmup=True)
    with timer.host_phase("read"):
        pass
    with timer.phase("compute"):
        pass
    timer.end_repeat(record=False)
    assert rec.calls == [
        ("push", "repeat 0 (warm-up)"),
        ("push", "read"),
        ("pop",),
        ("push", "compute"),
        ("pop",),
        ("pop",),
    ]


def test_a_phase_that_raises_still_pops_its_range():
    rec = Recorder()
    timer = PhaseTimer(np, rec)
    timer.start_repeat()
    with pytest.raises(RuntimeError):
        with timer.host_phase("read"):
            raise RuntimeError("boom")
    assert rec.calls == [("push", "repeat 0"), ("push", "read"), ("pop",)]


def test_nvtx_is_off_unless_asked_or_profiled_and_asked_without_the_package_is_exit_2(monkeypatch):
    pytest.importorskip("nvtx", reason="the test extra brings nvtx")
    assert nvtx_ranges(False) == (None, "off")  # no profiler attached here
    ranges, state = nvtx_ranges(True)
    assert ranges is not None and state == "on (--nvtx; no profiler attached)"
    ranges.push("read")  # NVTX's no-op domain: harmless
    ranges.pop()
    monkeypatch.setitem(sys.modules, "nvtx", None)  # as if not installed
    assert nvtx_ranges(False) == (None, "off")
    with pytest.raises(ConfigError, match="--nvtx: the nvtx package is not installed"):
        nvtx_ranges(True)

"""Per-phase timers: CUDA events for device phases on a GPU, perf_counter otherwise.

A repeat is bracketed by ``start_repeat``/``end_repeat``; ``total`` is its wall time
(device synchronized at both ends). Warm-up repeats run the same code but are not kept in ``records``.

Besides the seconds of each phase, every repeat keeps where its phases lay (``Repeat.spans``: name, track,
start and end in seconds from the repeat's start): the timeline that traces and report.html draw. Host phases
lie on track ``host``; device phases on ``gpu`` (the compute stream), placed by their CUDA events' distance
from an event recorded as the repeat starts (the device is idle then, so it runs when the host starts);
spans the caller recorded on other streams go on the track it names.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import faults, waits
from . import xp as xpmod

HOST, GPU = "host", "gpu"
# a phase's host side where its time is a device span (a torch step's on a GPU): "host:forward" is the seconds the
# host spent issuing the forward. Kept in each repeat's record beside the phase, never a phase of its own.
HOST_SIDE = "host:"


def host_side(name: str) -> str:
    return HOST_SIDE + name


def is_host_side(name: str) -> bool:
    return name.startswith(HOST_SIDE)


@dataclass
class Repeat:
    """One repeat's timeline: ``start`` (perf_counter), whether it was a warm-up, and its spans
    [(name, track, start s, end s from the repeat's start)]."""

    start: float
    warmup: bool
    spans: list[tuple[str, str, float, float]] = field(default_factory=list)


class PhaseTimer:
    """Collects {phase: seconds} for each recorded repeat of one rank, and each repeat's timeline.

    Attributes:
        records: one dict per recorded repeat, phase name -> seconds (with ``total``); warmup_records: the same
            of the warm-up repeats.
        timeline: one Repeat per repeat run, warm-ups included, in order.
    """

    def __init__(self, xp, ranges=None):
        self._xp = xp
        self._gpu = xp is not np
        self._ranges = ranges  # spmd.core.annotate.Ranges (NVTX) or None
        self.records: list[dict[str, float]] = []
        self.warmup_records: list[dict[str, float]] = []
        self.timeline: list[Repeat] = []
        self._host: dict[str, float] = defaultdict(float)
        self._events: list[tuple[str, object, object, int, str]] = []
        self._t0 = None
        self._excluded = 0.0  # seconds of this repeat's untimed work (``exclude``)
        self._scale = 1.0  # what the repeat's timed part is scaled by (``scale_total``)
        self.excluded = {"warmup": 0.0, "repeats": 0.0}  # untimed work over the warm-up and the recorded repeats
        self._ref = None  # the repeat's first CUDA event: device times are placed from it

    def start_repeat(self, warmup: bool = False) -> None:
        xpmod.synchronize(self._xp)
        self._host.clear()
        self._events.clear()
        if self._ranges is not None:
            self._ranges.push(f"repeat {len(self.timeline)}" + (" (warm-up)" if warmup else ""))
        self._excluded = 0.0
        self._scale = 1.0
        self._t0 = time.perf_counter()
        if self._gpu:
            self._ref = self._xp.cuda.Event()
            self._ref.record()
        self.timeline.append(Repeat(self._t0, warmup))

    def relative(self, t: float) -> float:
        """A perf_counter reading as seconds from this repeat's start (0 outside a repeat)."""
        return t - self._t0 if self._t0 is not None else 0.0

    @contextmanager
    def phase(self, name: str):
        """Time device work: CUDA events on the current stream on a GPU."""
        if not self._gpu:
            with self.host_phase(name):
                yield
            return
        start = self._xp.cuda.Event()
        start.record()
        self._push(name)
        enter_phase(name)  # after the start: an injected delay belongs to the phase
        try:
            yield
        finally:
            self._pop()
        end = self._xp.cuda.Event()
        end.record()
        self._events.append((name, start, end, 1, GPU))

    def span(self, name: str, start, end, weight: int = 1, track: str = GPU) -> None:
        """Add ``weight`` times (-1: subtract) the time between two CUDA events recorded by the
        caller, on any stream: phases of work that overlaps across streams. Spans of positive weight are
        drawn on ``track`` (the stream they ran on)."""
        self._events.append((name, start, end, weight, track))

    def exclude(self, seconds: float) -> None:
        """Take ``seconds`` of untimed work done inside this repeat (a checked step) out of its total."""
        self._excluded += seconds

    def scale_total(self, factor: float) -> None:
        """This repeat's total times ``factor``: the work it stands for at its timed part's rate (a window whose
        checked steps were taken out of the timing, timed for the steps it has)."""
        self._scale = factor

    def add(self, name: str, seconds: float) -> None:
        """Add seconds the caller measured on the host to phase ``name``."""
        self._host[name] += seconds

    def place(self, name: str, start: float, end: float, track: str = HOST) -> None:
        """Draw ``name`` on ``track`` from ``start`` to ``end`` (seconds from the repeat's start) without adding
        to any phase: where a workload knows when its phases ran but times them its own way. Outside a repeat (a
        workload's ``run`` called by hand) nothing is drawn."""
        if self._t0 is not None:
            self.timeline[-1].spans.append((name, track, start, end))

    def event_offset(self, handle) -> float:
        """Seconds from the repeat's start to a CUDA event already completed: ``handle`` is the event's raw
        cudaEvent_t (another library's event, such as PyTorch's ``cuda_event``)."""
        runtime = self._xp.cuda.runtime
        return runtime.eventElapsedTime(self._ref.ptr, handle) / 1e3

    @contextmanager
    def host_phase(self, name: str):
        """Time host work (file reads, Python) with perf_counter."""
        self._push(name)
        t0 = time.perf_counter()
        try:
            enter_phase(name)  # after the start: an injected delay belongs to the phase
            yield
        finally:
            t1 = time.perf_counter()
            self._pop()
        self._host[name] += t1 - t0
        if self._t0 is not None:
            self.place(name, t0 - self._t0, t1 - self._t0)

    def end_repeat(self, record: bool = True) -> dict[str, float]:
        """Finish the repeat: wait for the device, resolve events, keep it if ``record``."""
        xpmod.synchronize(self._xp)
        times = dict(self._host)
        wall = time.perf_counter() - self._t0
        times["total"] = (wall - self._excluded) * self._scale
        repeat = self.timeline[-1]
        elapsed = self._xp.cuda.get_elapsed_time if self._gpu else None
        for name, start, end, weight, track in self._events:
            seconds = elapsed(start, end) / 1e3
            times[name] = times.get(name, 0.0) + weight * seconds
            if weight > 0:
                begin = elapsed(self._ref, start) / 1e3
                repeat.spans.append((name, track, begin, begin + seconds))
        for name in {name for name, *_ in self._events}:
            times[name] = max(times[name], 0.0)  # a difference of spans cannot be negative time
        # the outline is the whole repeat as it ran: a checked step taken out of the total still lies inside it
        repeat.spans.append(("repeat", "repeats", 0.0, wall))
        if self._ranges is not None:
            self._ranges.pop()
        (self.records if record else self.warmup_records).append(times)
        self.excluded["repeats" if record else "warmup"] += self._excluded
        self._t0 = None
        return times

    def _push(self, name: str) -> None:
        if self._ranges is not None:
            self._ranges.push(name)

    def _pop(self) -> None:
        if self._ranges is not None:
            self._ranges.pop()


def enter_phase(name: str, timed: bool = True, fault: bool = True) -> None:
    """This rank enters phase ``name``. The watchdog's heartbeat says so (``timed`` for a phase of a run, which
    timeout_s bounds), and an injected fault armed for it fires (spmd.core.faults). ``fault=False`` leaves the
    fault to a training workload, which fires it in each step instead."""
    waits.note_phase(name, timed)
    if fault:
        faults.at(name)

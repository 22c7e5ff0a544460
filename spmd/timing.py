"""Per-phase timers: CUDA events for device phases on a GPU, perf_counter otherwise.

A repeat is bracketed by ``start_repeat``/``end_repeat``; ``total`` is its wall time
(device synchronized at both ends). Warm-up repeats run the same code but are not kept.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

import numpy as np

from . import faults, waits
from . import xp as xpmod


class PhaseTimer:
    """Collects {phase: seconds} for each recorded repeat of one rank.

    Attributes:
        records: one dict per recorded repeat, phase name -> seconds (with ``total``).
    """

    def __init__(self, xp):
        self._xp = xp
        self._gpu = xp is not np
        self.records: list[dict[str, float]] = []
        self._host: dict[str, float] = defaultdict(float)
        self._events: list[tuple[str, object, object, int]] = []
        self._t0 = None

    def start_repeat(self) -> None:
        xpmod.synchronize(self._xp)
        self._host.clear()
        self._events.clear()
        self._t0 = time.perf_counter()

    @contextmanager
    def phase(self, name: str):
        """Time device work: CUDA events on the current stream on a GPU."""
        enter_phase(name)
        if not self._gpu:
            with self.host_phase(name):
                yield
            return
        start = self._xp.cuda.Event()
        start.record()
        yield
        end = self._xp.cuda.Event()
        end.record()
        self._events.append((name, start, end, 1))

    def span(self, name: str, start, end, weight: int = 1) -> None:
        """Add ``weight`` times (-1: subtract) the time between two CUDA events recorded by the
        caller, on any stream: phases of work that overlaps across streams."""
        self._events.append((name, start, end, weight))

    def add(self, name: str, seconds: float) -> None:
        """Add seconds the caller measured on the host to phase ``name``."""
        self._host[name] += seconds

    @contextmanager
    def host_phase(self, name: str):
        """Time host work (file reads, Python) with perf_counter."""
        enter_phase(name)
        t0 = time.perf_counter()
        yield
        self._host[name] += time.perf_counter() - t0

    def end_repeat(self, record: bool = True) -> dict[str, float]:
        """Finish the repeat: wait for the device, resolve events, keep it if ``record``."""
        xpmod.synchronize(self._xp)
        times = dict(self._host)
        times["total"] = time.perf_counter() - self._t0
        for name, start, end, weight in self._events:
            seconds = self._xp.cuda.get_elapsed_time(start, end) / 1e3
            times[name] = times.get(name, 0.0) + weight * seconds
        for name in {name for name, *_ in self._events}:
            times[name] = max(times[name], 0.0)  # a difference of spans cannot be negative time
        if record:
            self.records.append(times)
        return times


def enter_phase(name: str, timed: bool = True) -> None:
    """This rank enters phase ``name``: the watchdog's heartbeat says so (``timed``: a phase of a run,
    bounded by timeout_s), and an injected fault armed for it fires (spmd.faults)."""
    waits.note_phase(name, timed)
    faults.at(name)

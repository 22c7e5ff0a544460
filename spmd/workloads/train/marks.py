"""Timestamps inside one training step, turned into phases.

On a GPU they are CUDA events (recorded on the stream that does the work, so overlapped
communication is timed on its own stream); on the CPU, perf_counter. Phases of one step with
k micro-batches, from marks s (start), f_j (after forward j), b_j (after backward j),
w (the compute stream got every reduced bucket), o (after the optimizer):
forward = sum of f_j - (s or b_{j-1}); backward = sum of b_j - f_j; comm (exposed) = w - b_{k-1};
optimizer = o - w; comm_overlapped = (time the buckets' allreduces took) - comm.
``timeline()`` gives the last step's marks and each bucket's allreduce as offsets from s (report.json
``result.step_timeline_us``): where an allreduce waited, and what of it backward did not hide.
"""

from __future__ import annotations

import time

from ...core import xp as xpmod
from ...core.libraries import cuda_driver, driver_call


def driver_record():
    """Records a CuPy event on a CuPy stream with CU_EVENT_RECORD_EXTERNAL (cuda-bindings), or None where the
    bindings are missing: a timing event inside a CUDA graph capture needs that flag, which CuPy's Event.record
    does not pass."""
    driver = cuda_driver()
    if driver is None:
        return None
    external = driver.CUevent_record_flags.CU_EVENT_RECORD_EXTERNAL

    def record(event, stream) -> None:
        driver_call("cuEventRecordWithFlags", driver.CUevent(event.ptr), driver.CUstream(stream.ptr), external)

    return record


class HostMarks:
    """perf_counter marks of one step on the CPU. Communication blocks here, so all of it
    is exposed; the part spent inside backward is moved from backward to comm."""

    def __init__(self, micro: int, buckets: int):
        self.micro = micro
        self.t: dict[str, float] = {}
        self.comm_seconds = 0.0
        self._comm_t0 = 0.0
        self.spans = [(0.0, 0.0)] * buckets

    def mark(self, name: str) -> None:
        self.t[name] = time.perf_counter()

    def comm_start(self, i: int) -> None:
        self._comm_t0 = time.perf_counter()

    def comm_end(self, i: int) -> None:
        end = time.perf_counter()
        self.comm_seconds += end - self._comm_t0
        self.spans[i] = (self._comm_t0, end)

    def timeline(self) -> dict:
        s = self.t["s"]
        return _timeline(
            {k: (v - s) * 1e6 for k, v in self.t.items()}, [((a - s) * 1e6, (b - s) * 1e6) for a, b in self.spans]
        )

    def add_to(self, timer, weight: int = 1) -> None:
        t, k = self.t, self.micro
        forward = sum(t[f"f{j}"] - (t["s"] if j == 0 else t[f"b{j - 1}"]) for j in range(k))
        backward = sum(t[f"b{j}"] - t[f"f{j}"] for j in range(k))
        after = t["w"] - t[f"b{k - 1}"]  # comm launched after backward (overlap off)
        inside = max(0.0, self.comm_seconds - after)
        timer.add("forward", forward)
        timer.add("backward", backward - inside)
        timer.add("comm", self.comm_seconds)
        timer.add("optimizer", t["o"] - t["w"])
        self.comm_seconds = 0.0
        at = timer.relative  # the step on the repeat's timeline: buckets' allreduces inside backward on their track
        for j in range(k):
            timer.place("forward", at(t["s"] if j == 0 else t[f"b{j - 1}"]), at(t[f"f{j}"]))
            timer.place("backward", at(t[f"f{j}"]), at(t[f"b{j}"]))
        for a, b in self.spans:
            if b > a:
                timer.place("comm", at(a), at(b), track="comm")
        timer.place("optimizer", at(t["w"]), at(t["o"]))


class DeviceMarks:
    """CUDA-event marks of one step, reusable: record, then read after the device is done."""

    def __init__(self, micro: int, buckets: int):
        cupy = xpmod.cupy
        self.micro = micro
        names = ["s", "w", "o"] + [f"f{j}" for j in range(micro)] + [f"b{j}" for j in range(micro)]
        self.ev = {name: cupy.cuda.Event() for name in names}
        self.comm = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(buckets)]
        self.capturing = False
        self._record = driver_record()

    @property
    def can_capture(self) -> bool:
        return self._record is not None

    def _put(self, event) -> None:
        stream = xpmod.cupy.cuda.get_current_stream()
        if self.capturing:  # a timing event inside a graph: an event-record node
            self._record(event, stream)
        else:
            event.record(stream)

    def mark(self, name: str) -> None:
        self._put(self.ev[name])

    def comm_start(self, i: int) -> None:
        self._put(self.comm[i][0])

    def comm_end(self, i: int) -> None:
        self._put(self.comm[i][1])

    def timeline(self) -> dict:
        """The last recorded step (the device is done with it): offsets from s in microseconds."""
        since = lambda e: xpmod.cupy.cuda.get_elapsed_time(self.ev["s"], e) * 1e3  # noqa: E731
        return _timeline({k: since(e) for k, e in self.ev.items()}, [(since(a), since(b)) for a, b in self.comm])

    def add_to(self, timer, weight: int = 1) -> None:
        """Hand the step's spans to the PhaseTimer (resolved at the end of the window);
        ``weight``: how many steps these marks stand for (a replayed graph's last step)."""
        ev, k = self.ev, self.micro
        for j in range(k):
            timer.span("forward", ev["s"] if j == 0 else ev[f"b{j - 1}"], ev[f"f{j}"], weight)
            timer.span("backward", ev[f"f{j}"], ev[f"b{j}"], weight)
        timer.span("comm", ev[f"b{k - 1}"], ev["w"], weight)
        timer.span("optimizer", ev["w"], ev["o"], weight)
        for start, end in self.comm:
            timer.span("comm_overlapped", start, end, weight, track="gpu comm stream")
        timer.span("comm_overlapped", ev[f"b{k - 1}"], ev["w"], -weight)


def _timeline(marks: dict[str, float], buckets: list[tuple[float, float]]) -> dict:
    order = sorted(marks, key=marks.get)
    return {
        "marks": {k: round(marks[k], 2) for k in order},
        "allreduce": [[round(a, 2), round(b, 2)] for a, b in buckets],
    }


def make_marks(device: str, micro: int, buckets: int):
    return (DeviceMarks if device == "gpu" else HostMarks)(micro, buckets)

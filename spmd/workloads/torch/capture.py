"""Kernel-level capture of a few steps on every rank: torch.profiler (Kineto; CUPTI on a GPU) on
``params.capture_steps`` steps run after the timed repeats, so no timed step is profiled or follows a capture.

The profiler starts one step earlier (its warm-up step: CUPTI's set-up lands there, not in a captured step) and
marks each captured step with ``ProfilerStep#k``, as a user's own ``prof.step()`` loop does, so Holistic Trace
Analysis reads the trace as it reads any. What the captured steps cost is measured where they run: their wall
time per step beside the timed steps' (report.json ``kernels.capture``).
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import time

from ...core.files import MARK
from ...core.version import __version__


class Capture:
    """The profiler over a window of ``steps`` + 1 steps: step 0 its warm-up, steps 1 .. ``steps`` captured."""

    def __init__(self, torch, gpu: bool, steps: int):
        self.torch, self.gpu, self.steps = torch, gpu, steps
        self.prof = None
        self.trace: dict | None = None
        self.seconds = None  # wall time of the captured steps
        self.started = 0.0  # perf_counter when the first captured step's ProfilerStep opened
        self._t0 = 0.0

    def before(self, i: int) -> None:
        """Before step ``i`` of the window."""
        if i == 0:
            from torch.profiler import ProfilerActivity, profile, schedule

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.gpu else [])
            self.prof = profile(
                activities=activities,
                schedule=schedule(wait=0, warmup=1, active=self.steps, repeat=1),
                on_trace_ready=self._ready,
                record_shapes=False,
                with_stack=False,
                profile_memory=False,
            )
            self.prof.start()
        elif i == 1:
            self._synchronize()
            self._t0 = time.perf_counter()

    def after(self, i: int) -> None:
        """After step ``i`` of the window."""
        if self.prof is None:
            return
        last = i == self.steps
        if last:
            self._synchronize()
            self.seconds = time.perf_counter() - self._t0
        self.prof.step()
        if i == 0:
            self.started = time.perf_counter()
        if last:
            self.prof.stop()
            self.prof = None

    def _synchronize(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()

    def _ready(self, prof) -> None:
        fd, path = tempfile.mkstemp(prefix="spmd-capture-", suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                self.trace = json.load(f)
        finally:
            os.unlink(path)


def packed(trace: dict, rank: int, max_bytes: int) -> tuple[bytes | None, int]:
    """The trace as spmd keeps it: its record first, gzipped JSON (None when over ``max_bytes``), and its size."""
    head = {"spmd_version": __version__, "spmd_record": MARK, "spmd_rank": rank}
    # JSON's default separators: Holistic Trace Analysis finds a file's rank by the text '"rank": N'
    text = json.dumps({**head, **trace}, allow_nan=False, default=str)
    data = gzip.compress(text.encode(), compresslevel=6, mtime=0)
    return (data if len(data) <= max_bytes else None), len(data)

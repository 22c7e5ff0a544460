"""torch.profiler (Kineto; CUPTI on a GPU) over a window of steps a workload runs after its timed repeats, so no
timed step is profiled or follows a capture.

The profiler starts one step earlier (its warm-up step: CUPTI's set-up lands there, not in a captured step) and
marks each captured step with ``ProfilerStep#k``, as a user's own ``prof.step()`` loop does, so Holistic Trace
Analysis reads the trace as it reads any. What the captured steps cost is measured where they run: their wall
time per step beside the timed steps' (report.json ``kernels.capture``).
"""

from __future__ import annotations

import json
import os
import tempfile
import time


class ProfilerWindow:
    """The profiler over ``steps`` + 1 steps: step 0 its warm-up, steps 1 .. ``steps`` captured.

    A workload runs the window's steps (``Workload.run_steps``), calling ``before(i)`` and ``after(i)`` around
    step ``i``, and sets ``untimed_collectives`` where its timed phases miss collectives these steps run
    (SyncBatchNorm's, a CUDA graph replay's): there the captured steps alone may name a straggler.
    """

    def __init__(self, gpu: bool, steps: int):
        self.gpu, self.steps = gpu, steps
        self.untimed_collectives = False
        self.prof = None
        self.trace: dict | None = None
        self.seconds = None  # wall time of the captured steps
        self.started = 0.0  # perf_counter when the first captured step's ProfilerStep opened
        self._t0 = 0.0

    @property
    def length(self) -> int:
        """The steps the workload runs: the warm-up step and the captured ones."""
        return self.steps + 1

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
            import torch

            torch.cuda.synchronize()

    def _ready(self, prof) -> None:
        fd, path = tempfile.mkstemp(prefix="spmd-capture-", suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                self.trace = json.load(f)
        finally:
            os.unlink(path)

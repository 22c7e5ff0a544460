"""The capture as the job holds it: config ``capture`` (``--capture N``), each rank's trace file, the window a
workload runs its steps in, and what one rank's captured steps give the report.

spmd.job is the one caller: it checks the files before the work, runs the window after the timed repeats
(``Workload.run_steps``), gathers every rank's ``Captured`` and writes the kept traces with the report.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, NamedTuple

from ...core.files import MARK
from ...core.version import __version__
from .kernels import analyze, timeline_spans
from .window import ProfilerWindow


class Captured(NamedTuple):
    """One rank's captured steps: their analysis (``kernels.analyze`` and what capturing them cost), the trace as
    kept (gzipped; None when not kept), and with spans asked (perf_counter at the first captured step, its spans for
    the Chrome trace)."""

    analysis: dict
    trace: bytes | None
    drawn: Any = None


def trace_paths(out_dir, ranks: int) -> list[Path]:
    """Where each rank's captured trace is kept: ``out_dir/kernels/rankR.trace.json.gz`` (none without a folder)."""
    if out_dir is None:
        return []
    return [Path(out_dir) / "kernels" / f"rank{r}.trace.json.gz" for r in range(ranks)]


def packed(trace: dict, rank: int, max_bytes: int) -> tuple[bytes | None, int]:
    """The trace as spmd keeps it: its record first, gzipped JSON (None when over ``max_bytes``), and its size."""
    head = {"spmd_version": __version__, "spmd_record": MARK, "spmd_rank": rank}
    # JSON's default separators: Holistic Trace Analysis finds a file's rank by the text '"rank": N'
    text = json.dumps({**head, **trace}, allow_nan=False, default=str)
    data = gzip.compress(text.encode(), compresslevel=6, mtime=0)
    return (data if len(data) <= max_bytes else None), len(data)


class Capture:
    """A run's capture on one rank: ``settings`` (config ``capture``: steps, max_mb)."""

    def __init__(self, settings, gpu: bool, rank: int):
        self.settings, self.gpu, self.rank = settings, gpu, rank
        self.window: ProfilerWindow | None = None

    def run(self, workload) -> None:
        """The captured steps: the workload runs them (one more for the profiler's warm-up) inside the window."""
        self.window = ProfilerWindow(self.gpu, self.settings.steps)
        workload.run_steps(self.window)

    def result(self, spans: bool = False) -> Captured:
        """This rank's captured steps: their analysis with what capturing them cost, the trace as kept (None over
        ``max_mb``), and with ``spans`` the captured steps for the Chrome trace."""
        w = self.window
        if w is None or w.trace is None:
            why = "no step was captured" if w is None else "the profiler returned no trace"
            return Captured({"steps": 0, "why": why}, None)
        try:
            analysis = analyze(w.trace, self.gpu)
        except (KeyError, TypeError, ValueError) as exc:  # a trace this analysis cannot read: kept, said so
            analysis = {"steps": 0, "why": f"the trace could not be analysed ({type(exc).__name__}: {exc})"}
        drawn = (w.started, timeline_spans(w.trace, self.gpu)) if spans else None
        data, size = packed(w.trace, self.rank, int(self.settings.max_mb * 2**20))
        w.trace = None
        analysis["untimed_collectives"] = w.untimed_collectives
        analysis["capture"] = {
            "steps": w.steps,
            "seconds_per_step": w.seconds / w.steps,
            "trace_bytes": size,
            "kept": data is not None,
        }
        return Captured(analysis, data, drawn)

"""Progress lines on rank 0's stderr for work that takes more than a few seconds: each repeat of a run (with
what the workload can say of it, e.g. train's steps/s, samples/s and loss), each size of a sweep as it starts.

Shown where stderr is a terminal; in a batch job's log only when asked (``--progress``); never with ``--quiet``.
"""

from __future__ import annotations

import sys
import time

from .errors import one_line


def wanted(rank: int, asked: bool, quiet: bool) -> bool:
    """Whether this rank prints progress: rank 0 alone, not with --quiet, on a terminal or when asked."""
    return rank == 0 and not quiet and (asked or sys.stderr.isatty())


class Progress:
    """Lines ``LABEL: text`` on stderr, when ``enabled``; ``label`` can change (a sweep names its size)."""

    def __init__(self, label: str, enabled: bool):
        self.label, self.enabled = label, enabled
        self.started = time.monotonic()

    def begin(self, label: str, text: str) -> None:
        """A new part of the work (a sweep's next size): its label, its clock, and a first line."""
        self.label, self.started = label, time.monotonic()
        self.say(text)

    def say(self, text: str) -> None:
        if self.enabled:
            print(one_line(f"{self.label}: {text}"), file=sys.stderr, flush=True)

    def repeat(self, index: int, warmup: int, repeats: int | None, note: str = "") -> None:
        """After repeat ``index`` (0-based, warm-ups first) of ``warmup + repeats`` (None: as many as ``repeats:
        auto`` will take)."""
        if not self.enabled:
            return
        of = f"/{repeats}" if repeats is not None else " (auto)"
        which = f"warm-up {index + 1}/{warmup}" if index < warmup else f"repeat {index - warmup + 1}{of}"
        self.say(f"{which} done, {time.monotonic() - self.started:.1f} s elapsed" + (f"; {note}" if note else ""))

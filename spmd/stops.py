"""Ctrl-C: an interrupt is noted by its handler and acted on where that is safe.

The handler never raises into the main thread while a watchdog runs (the main thread may be inside a
collective, which its peers never reach once they stop): it records the interrupt, and the watchdog's
thread ends the job (exit 130) on its next beat. A workload that can stop cleanly between repeats
(train, which checkpoints first) says so with ``clean_stop()``; the watchdog then gives it until
timeout_s, and a second Ctrl-C ends the job at once. Without a watchdog (``SPMD_WATCHDOG=off``, or a
command that starts no MPI job) the handler raises KeyboardInterrupt, and the CLI exits 130.
"""

from __future__ import annotations

import contextlib
import signal
import time

from . import waits

EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended

_interrupts: list[float] = []  # when each SIGINT came (monotonic)
_clean_stoppers = 0


def _note(signum, frame) -> None:
    _interrupts.append(time.monotonic())
    if waits.installed() is None:
        raise KeyboardInterrupt


@contextlib.contextmanager
def handling_interrupts():
    """Install the handler for the block (the main thread of a command), the previous one after it."""
    previous = signal.signal(signal.SIGINT, _note)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted() -> bool:
    """A SIGINT came while the handler was installed."""
    return bool(_interrupts)


@contextlib.contextmanager
def clean_stop():
    """The block checks ``interrupted()`` between its repeats and stops cleanly on its own."""
    global _clean_stoppers
    _clean_stoppers += 1
    try:
        yield
    finally:
        _clean_stoppers -= 1


def end_now(grace_s: float) -> bool:
    """Whether the job should be ended for an interrupt now: one came, and nothing stops cleanly, or
    that was given ``grace_s`` already, or the user pressed Ctrl-C twice."""
    if not _interrupts:
        return False
    return _clean_stoppers == 0 or len(_interrupts) > 1 or time.monotonic() - _interrupts[0] > grace_s

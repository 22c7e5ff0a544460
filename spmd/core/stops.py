"""Ctrl-C: an interrupt is noted by its handler and acted on where that is safe.

The handler never raises into the main thread while a watchdog runs (the main thread may be inside a
collective, which its peers never reach once they stop): it records the interrupt, and the watchdog's
thread ends the job (exit 130) on its next beat. A workload that can stop cleanly between repeats
(train, which checkpoints first) says so with ``clean_stop()``; the watchdog then gives it until
timeout_s, and a second Ctrl-C ends the job at once. Without a watchdog (``SPMD_WATCHDOG=off``, or a
command that starts no MPI job) the handler raises KeyboardInterrupt, and the CLI exits 130.

SIGTERM (a launcher ending the job, ``kill``, a time limit) keeps its meaning, the end of the process, but
first removes the temporary files this process was writing (``files.remove_own_temps``). A workload that
stops cleanly on it (train) installs its own handler while it runs: ``StopFlag``, which SIGTERM and SIGUSR1
(SLURM's time limit and its warning) set, checked between windows, a checkpoint written before it stops.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

from . import waits
from .files import remove_own_temps

EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended

_interrupts: list[float] = []  # when each SIGINT came (monotonic)
_clean_stoppers = 0


def _note(signum, frame) -> None:
    _interrupts.append(time.monotonic())
    if waits.installed() is None:
        raise KeyboardInterrupt


def _terminated(signum, frame) -> None:
    """SIGTERM: no temporary file left behind, then the signal's own ending (the exit status says SIGTERM)."""
    remove_own_temps()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextlib.contextmanager
def handling_interrupts():
    """Install the handlers for the block (the main thread of a command), the previous ones after it."""
    previous = {
        num: signal.signal(num, handler) for num, handler in ((signal.SIGINT, _note), (signal.SIGTERM, _terminated))
    }
    try:
        yield
    finally:
        for num, handler in previous.items():
            signal.signal(num, handler)


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


STOP_SIGNALS = ("SIGTERM", "SIGUSR1")  # SLURM: SIGTERM at the time limit, --signal=USR1@T before it


class StopFlag:
    """SIGTERM / SIGUSR1 set a flag (and nothing else); the job checks it, and Ctrl-C
    (above), between windows, writing a checkpoint before it stops."""

    def __init__(self):
        self.name, self._old = None, {}
        self._clean = contextlib.ExitStack()
        self._clean.enter_context(clean_stop())  # the watchdog gives Ctrl-C time to reach a window's end
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        for name in STOP_SIGNALS:
            num = getattr(signal, name, None)
            if num is not None:
                self._old[num] = signal.signal(num, self._handle)

    def _handle(self, signum, frame):
        self.name = signal.Signals(signum).name

    def restore(self) -> None:
        for num, old in self._old.items():
            signal.signal(num, old)
        self._old.clear()
        self._clean.close()

"""Stopping training cleanly: SIGTERM and SIGUSR1 (SLURM's time limit and its warning) set a flag that the
workload checks between windows, writing a checkpoint before it stops."""

from __future__ import annotations

import contextlib
import signal
import threading

from ... import stops

STOP_SIGNALS = ("SIGTERM", "SIGUSR1")  # SLURM: SIGTERM at the time limit, --signal=USR1@T before it


class StopFlag:
    """SIGTERM / SIGUSR1 set a flag (and nothing else); the job checks it, and Ctrl-C
    (``spmd.stops``), between windows, writing a checkpoint before it stops."""

    def __init__(self):
        self.name, self._old = None, {}
        self._clean = contextlib.ExitStack()
        self._clean.enter_context(stops.clean_stop())  # the watchdog gives Ctrl-C time to reach a window's end
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

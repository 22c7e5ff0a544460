"""What this rank waits in, and which phase it is in: the marks the watchdog reads.

No MPI here (``xp`` and ``timing`` import it); ``spmd.core.watchdog`` installs the watchdog that
receives the marks. Without one every mark is a global lookup and nothing more.
"""

from __future__ import annotations

import contextlib

_dog = None  # the running spmd.core.watchdog.Watchdog of this process, if any


def install(dog) -> None:
    global _dog
    _dog = dog


def installed():
    return _dog


class _Marked:
    __slots__ = ("what", "dog", "timed")

    def __init__(self, dog, what: str, timed: bool):
        self.dog, self.what, self.timed = dog, what, timed

    def __enter__(self):
        self.dog.enter(self.what, self.timed)
        return self

    def __exit__(self, *exc):
        self.dog.leave()
        return False


_UNWATCHED = contextlib.nullcontext()


def Waiting(what: str, timed: bool = True):  # noqa: N802 - used as a context manager, named like one
    """``with Waiting('allgather'):`` marks this rank as waiting on its peers (or on the GPU);
    without a watchdog it is a shared no-op (spmd calls it on every collective). ``timed=False``:
    a wait with no bound, shown but never timed out (ranks idle while a sweep runs a smaller size)."""
    dog = _dog
    return _UNWATCHED if dog is None else _Marked(dog, what, timed)


def note_phase(phase: str, timed: bool = True) -> None:
    """This rank entered ``phase`` (what its heartbeat reports); ``timed``: a phase of a run, which the
    watchdog does not let outlast timeout_s."""
    if _dog is not None:
        _dog.note_phase(phase, timed)

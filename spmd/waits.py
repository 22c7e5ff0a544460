"""What this rank waits in, and which phase it is in: the marks the watchdog reads.

No MPI here (``xp`` and ``timing`` import it); ``spmd.watchdog`` installs the watchdog that
receives the marks. Without one every mark is a global lookup and nothing more.
"""

from __future__ import annotations

import contextlib

_dog = None  # the running spmd.watchdog.Watchdog of this process, if any


def install(dog) -> None:
    global _dog
    _dog = dog


def installed():
    return _dog


class _Marked:
    __slots__ = ("what", "dog")

    def __init__(self, dog, what: str):
        self.dog, self.what = dog, what

    def __enter__(self):
        self.dog.enter(self.what)
        return self

    def __exit__(self, *exc):
        self.dog.leave()
        return False


_UNWATCHED = contextlib.nullcontext()


def Waiting(what: str):  # noqa: N802 - used as a context manager, named like one
    """``with Waiting('allgather'):`` marks this rank as waiting on its peers (or on the GPU);
    without a watchdog it is a shared no-op (spmd calls it on every collective)."""
    dog = _dog
    return _UNWATCHED if dog is None else _Marked(dog, what)


def note_phase(phase: str) -> None:
    """This rank entered ``phase`` (what its heartbeat reports)."""
    if _dog is not None:
        _dog.phase = phase

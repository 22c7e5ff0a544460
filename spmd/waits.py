"""What this rank waits in, and which phase it is in: the marks the watchdog reads.

No MPI here (``xp`` and ``timing`` import it); ``spmd.watchdog`` installs the watchdog that
receives the marks. Without one every mark is a global lookup and nothing more.
"""

from __future__ import annotations

_dog = None  # the running spmd.watchdog.Watchdog of this process, if any


def install(dog) -> None:
    global _dog
    _dog = dog


def installed():
    return _dog


class Waiting:
    """``with Waiting('allgather'):`` marks this rank as waiting on its peers (or on the GPU)."""

    __slots__ = ("what", "dog")

    def __init__(self, what: str):
        self.what = what
        self.dog = _dog

    def __enter__(self):
        if self.dog is not None:
            self.dog.enter(self.what)
        return self

    def __exit__(self, *exc):
        if self.dog is not None:
            self.dog.leave()
        return False


def note_phase(phase: str) -> None:
    """This rank entered ``phase`` (what its heartbeat reports)."""
    if _dog is not None:
        _dog.phase = phase

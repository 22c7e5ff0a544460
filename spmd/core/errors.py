"""Error hierarchy. Each error carries the process exit code the CLI uses for it."""

import reprlib

_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 60
_BRIEF.maxlist = _BRIEF.maxtuple = _BRIEF.maxdict = _BRIEF.maxset = 6
_BRIEF.maxlevel = 3


_ESCAPES = {
    **{c: f"\\x{c:02x}" for c in (*range(32), 0x7F, 0x85)},
    0x2028: "\\u2028",
    0x2029: "\\u2029",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}


def one_line(text) -> str:
    """``text`` with every line break and control character escaped (``\\n``, ``\\x1b``): a message that
    quotes a user's value (a path holding a newline) stays one line, and cannot forge a second one."""
    return str(text).translate(_ESCAPES)


def brief(value) -> str:
    """``repr(value)``, cut to a few dozen characters: a message never formats an unbounded (or
    recursive) value a user supplied."""
    return _BRIEF.repr(value)


class SpmdError(Exception):
    """Base of every error spmd raises on purpose.

    Attributes:
        exit_code: process exit status for this kind of failure.
        collective: True when every rank raised this same error (agreed through
            ``Context.agree``), so ranks may exit normally instead of aborting MPI.
    """

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.collective = False


class ConfigError(SpmdError):
    """The configuration is invalid: unknown key, wrong type, bad value."""

    exit_code = 2


class InputError(SpmdError):
    """An input file or dataset is missing, unreadable, or has the wrong shape or dtype."""

    exit_code = 2


class BackendUnavailable(SpmdError):
    """A requested device or communicator cannot be used on this machine."""

    exit_code = 2


class VerificationError(SpmdError):
    """The computed result does not match the reference."""

    exit_code = 3


class Stopped(SpmdError):
    """The job was asked to stop (SIGTERM, SIGUSR1) and saved what it needs to continue."""

    exit_code = 0


class UserCodeError(SpmdError):
    """A plug-in's own code raised: named with its function, file and line."""

    exit_code = 1


class TimedOut(SpmdError):
    """Work that must end did not within the config's timeout_s (where no watchdog runs to end the job)."""

    exit_code = 4


class Interrupted(SpmdError):
    """The user pressed Ctrl-C (SIGINT); what could be saved was saved."""

    exit_code = 130


_BY_NAME = {
    cls.__name__: cls
    for cls in (
        SpmdError,
        ConfigError,
        InputError,
        BackendUnavailable,
        VerificationError,
        Stopped,
        Interrupted,
        UserCodeError,
        TimedOut,
    )
}


def error_class(name: str) -> type[SpmdError]:
    """The error class called ``name`` (used to re-raise an error agreed across ranks)."""
    return _BY_NAME.get(name, SpmdError)

"""Fault injection: make one rank misbehave at one phase, to prove the job still ends cleanly.

``SPMD_FAULT="rank=R,phase=P,kind=K"`` (or the config key ``fault``, same text) arms the fault on
rank R (``rank=all``: on every rank); the other ranks run normally. Phases: read, h2d, compute, comm,
report, for the training workloads ``data`` (each step's batch) and for workload torch ``optimizer`` (before each
step's optimizer step); a training step enters ``data``, ``compute`` and ``optimizer`` once per step, so a delay
there is per step. Kinds:

- ``raise``: an exception on that rank alone (the bug case);
- ``exit``: the process dies without a word to its peers (a crash; the launcher must notice);
- ``hang``: the rank sleeps for ever (a deadlock or a stuck file system; the watchdog must notice);
- ``nan``: the rank's input rows are poisoned after reading (``phase=read`` only);
- ``oom``: the rank's memory check sees less free memory than its buffers need (``phase=read``: host
  buffers, ``phase=h2d``: device buffers; on a CPU run both are host memory);
- ``slow``: the rank sleeps ``seconds`` (``kind=slow,seconds=S``) each time it enters the phase: a straggler (a
  slow disk, a throttled GPU, a noisy neighbour) that the per-rank breakdown and trace must show;
- ``hog``: a busy Python thread on the rank from the moment it enters the phase (``phase=compute``) until the
  job ends: the rank's host is slowed (on a GPU its launch thread shares the interpreter with a spinning one);
- ``work``: the rank does ``seconds`` of extra device work each time it enters the phase (``phase=compute`` of a
  torch step: matrix products queued on its device; more work than the other ranks at the same host pace);
- ``corrupt``: silent data corruption: one element of the rank's computed output, chosen uniformly at random
  (``SPMD_FAULT_SEED``, default 0) among its non-zero ones, is multiplied by 1.01 (``phase=compute``; for
  workload torch also ``phase=backward``: a gradient bucket before DDP's allreduce, every step).
  Verification must catch it: the job exits 3.

The fault is per process and set once per job (``arm``); the hooks below cost one global lookup
when nothing is armed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError, SpmdError, brief

PHASES = ("read", "h2d", "data", "compute", "optimizer", "backward", "comm", "report")
KINDS = ("raise", "exit", "hang", "nan", "oom", "corrupt", "slow", "hog", "work")
TIMED = ("slow", "work")  # the kinds that take seconds=S
MAX_SLOW_S = 3600.0
ENV = "SPMD_FAULT"
SEED_ENV = "SPMD_FAULT_SEED"
CORRUPTION = 1.01


class InjectedFault(SpmdError):
    """The failure a ``kind=raise`` fault throws."""


@dataclass(frozen=True)
class Fault:
    """Rank ``rank`` (every rank: None) misbehaves (``kind``) when it reaches ``phase`` (``slow``: for
    ``seconds``)."""

    rank: int | None
    phase: str
    kind: str
    seconds: float = 0.0

    def describe(self) -> str:
        extra = f",seconds={self.seconds:g}" if self.kind in TIMED else ""
        return f"rank={'all' if self.rank is None else self.rank},phase={self.phase},kind={self.kind}{extra}"


def parse_fault(text: str) -> Fault:
    """``"rank=1,phase=comm,kind=hang"`` (``kind=slow,seconds=0.2``) -> Fault.

    Raises:
        ConfigError: a missing, unknown or invalid field.
    """
    fields = {}
    for item in str(text).split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or key not in ("rank", "phase", "kind", "seconds"):
            raise ConfigError(
                f"fault: {brief(text)}: expected rank=R,phase=P,kind=K (kind=slow or work: and seconds=S)"
            )
        fields[key] = value.strip()
    missing = [k for k in ("rank", "phase", "kind") if k not in fields]
    if missing:
        raise ConfigError(f"fault: {brief(text)}: {missing[0]} missing (expected rank=R,phase=P,kind=K)")
    try:
        rank = None if fields["rank"] == "all" else int(fields["rank"])
    except ValueError:
        raise ConfigError(f"fault: rank {brief(fields['rank'])} is not an integer or all") from None
    phase, kind = fields["phase"], fields["kind"]
    if rank is not None and rank < 0:
        raise ConfigError(f"fault: rank must be >= 0, got {rank}")
    if phase not in PHASES:
        raise ConfigError(f"fault: phase {brief(phase)} is not one of {', '.join(PHASES)}")
    if kind not in KINDS:
        raise ConfigError(f"fault: kind {brief(kind)} is not one of {', '.join(KINDS)}")
    if kind == "nan" and phase != "read":
        raise ConfigError("fault: kind=nan poisons the rows a rank reads: use phase=read")
    if kind == "corrupt" and phase not in ("compute", "backward"):
        raise ConfigError(
            "fault: kind=corrupt changes what a rank computed: use phase=compute (or phase=backward: a "
            "gradient of workload torch, before the exchange)"
        )
    seconds = 0.0
    if kind in TIMED:
        try:
            seconds = float(fields.get("seconds", ""))
        except ValueError:
            raise ConfigError(
                f"fault: kind={kind} needs seconds=S, a number of seconds (got {brief(fields.get('seconds'))})"
            ) from None
        if not 0 < seconds <= MAX_SLOW_S:
            raise ConfigError(f"fault: seconds={brief(fields['seconds'])}: more than 0 and at most {MAX_SLOW_S:g}")
        if kind == "slow" and phase not in ("read", "h2d", "data", "compute", "optimizer", "comm"):
            raise ConfigError(
                "fault: kind=slow delays a phase of the repeats: use phase=read, h2d, data, compute, optimizer or comm"
            )
    elif "seconds" in fields:
        raise ConfigError("fault: seconds=S goes with kind=slow or work only")
    if kind in ("hog", "work") and phase != "compute":
        raise ConfigError(f"fault: kind={kind} acts on a rank's compute: use phase=compute")
    if phase == "backward" and kind != "corrupt":
        raise ConfigError(
            "fault: phase=backward is where kind=corrupt changes a gradient (workload torch); other "
            "kinds act at read, h2d, data, compute, optimizer, comm or report"
        )
    if kind == "oom" and phase not in ("read", "h2d"):
        raise ConfigError("fault: kind=oom acts at the memory check of host (phase=read) or device (phase=h2d) buffers")
    return Fault(rank, phase, kind, seconds)


def fault_from(config_value: str | None) -> Fault | None:
    """The fault to inject: SPMD_FAULT if set, else the config's ``fault`` (None: none)."""
    text = os.environ.get(ENV)
    if text:
        try:
            return parse_fault(text)
        except ConfigError as exc:
            raise ConfigError(f"{ENV}: {exc}") from None
    return parse_fault(config_value) if config_value else None


def require_rank(fault: Fault | None, size: int) -> None:
    """Refuse a fault aimed at a rank the job does not have."""
    if fault is not None and fault.rank is not None and fault.rank >= size:
        raise ConfigError(f"fault: rank {fault.rank}, but the job has {size} ranks")


# -- the armed fault of this process ---------------------------------------------------------

_armed: Fault | None = None
_job_fault: Fault | None = None  # the job's fault, armed here or on another rank: the same on every rank
_where = ""
_said_nan = False  # a rank reads every repeat: the nan notice is printed once
_said_corrupt = False
_fired = False


def arm(fault: Fault | None, rank: int, host: str) -> None:
    """Arm ``fault`` if it targets this rank (every rank calls this with the same fault; one aimed
    beyond the job's ranks, as in the smaller runs of a sweep, arms nothing)."""
    global _armed, _job_fault, _where, _fired, _said_nan, _said_corrupt
    _job_fault = fault
    _armed = fault if fault is not None and fault.rank in (None, rank) else None
    _where = f"rank {rank} on {host}"
    _said_nan = _said_corrupt = False
    _fired = False


def disarm() -> None:
    global _armed, _job_fault
    _armed = _job_fault = None
    _hog_stop.set()


def job_injects(kind: str) -> bool:
    """Whether the job's fault, on whichever rank it is armed, is of ``kind``: the same answer on every rank, for
    choices that must agree across ranks (collective set-up)."""
    return _job_fault is not None and _job_fault.kind == kind


def require_fired() -> None:
    """Before the report: an armed fault that never acted is an error, not a silent pass (a CPU run
    has no h2d phase; a workload may not enter every phase)."""
    if _armed is not None and not _fired:
        raise ConfigError(
            f"SPMD_FAULT {_armed.describe()} never fired: this run did not reach phase "
            f"{_armed.phase}" + (" (a CPU run copies nothing to a device)" if _armed.phase == "h2d" else "")
        )


def at(phase: str) -> None:
    """This rank enters ``phase``: misbehave if a raise/exit/hang/slow/hog fault is armed for it."""
    fault = _armed
    if fault is None or fault.phase != phase or fault.kind not in ("raise", "exit", "hang", "slow", "hog"):
        return
    if fault.kind == "hog":
        if not _fired:
            _say("injecting hog at phase compute (a thread spinning in Python on this rank until the job ends)")
            _mark_fired()
            _hog_stop.clear()
            threading.Thread(target=_spin, name="spmd-fault-hog", daemon=True).start()
        return
    if fault.kind == "slow":  # every time: each repeat's phase is late by the same delay
        if not _fired:
            _say(f"injecting slow at phase {phase} ({fault.seconds:g} s each time this rank enters it)")
        _mark_fired()
        time.sleep(fault.seconds)
        return
    _mark_fired()
    _say(f"injecting {fault.kind} at phase {phase}")
    if fault.kind == "raise":
        raise InjectedFault(f"injected fault (SPMD_FAULT {fault.describe()}) at phase {phase}")
    if fault.kind == "exit":
        sys.stdout.flush()
        os._exit(17)  # no cleanup, no MPI_Finalize: what a crash looks like to the peers
    while True:  # hang: sleep (the GIL stays free, so this rank's watchdog thread keeps beating)
        time.sleep(1.0)


def injected_work_seconds() -> float:
    """The seconds of extra device work a ``work`` fault gives this rank each time it enters compute (0: none);
    the workload does the work (it knows its device)."""
    fault = _armed
    if fault is None or fault.kind != "work":
        return 0.0
    if not _fired:
        _say(f"injecting work at phase compute ({fault.seconds:g} s of extra device work each step)")
    _mark_fired()
    return fault.seconds


_hog_stop = threading.Event()


HOG_BUSY_S = 0.002  # the hog spins this long, then sleeps as long: the rank's thread gets the GIL about half the time


def _spin() -> None:
    """A thread that keeps the interpreter busy half the time (it takes the GIL in turns with the rank's own)."""
    while not _hog_stop.is_set():
        end = time.perf_counter() + HOG_BUSY_S
        while time.perf_counter() < end:
            pass
        time.sleep(HOG_BUSY_S)


def poison_rows(rows: np.ndarray) -> None:
    """A nan fault at read: write NaN over the middle row of what this rank just read."""
    global _said_nan
    fault = _armed
    if fault is None or fault.kind != "nan" or len(rows) == 0:
        return
    _mark_fired()
    if not _said_nan:
        _say(f"injecting nan at phase read (row {len(rows) // 2} of each block this rank reads)")
        _said_nan = True
    rows[len(rows) // 2] = np.nan if rows.dtype.kind == "f" else np.iinfo(rows.dtype).max


def poisoning() -> bool:
    """Whether a nan fault is armed on this rank (a reader that hands rows on as they land waits for it)."""
    return _armed is not None and _armed.kind == "nan"


def corrupting() -> bool:
    """Whether a corrupt fault is armed on this rank (workloads with their own streams wait for them first)."""
    return _armed is not None and _armed.kind == "corrupt"


def corrupt(output, what: str = "output") -> None:
    """A corrupt fault at compute: multiply one element of ``output`` (this rank's computed result, a NumPy or CuPy
    array or a view of one, changed in place) by CORRUPTION. The element is drawn uniformly among the non-zero ones by
    ``SPMD_FAULT_SEED`` (a zero times 1.01 would change nothing), the same one every repeat."""
    global _said_corrupt
    fault = _armed
    if fault is None or fault.kind != "corrupt":
        return
    on_gpu = hasattr(output, "get")
    if on_gpu:  # the work that wrote it may still run on another stream
        output.device.synchronize()
    host = np.ascontiguousarray(output.get() if on_gpu else output)
    nonzero = np.flatnonzero(host != 0)
    if nonzero.size == 0:
        return
    seed = os.environ.get(SEED_ENV, "0")
    try:
        index = int(np.random.default_rng(int(seed)).choice(nonzero))
    except ValueError:
        raise ConfigError(f"{SEED_ENV}: {brief(seed)} is not an integer") from None
    output[np.unravel_index(index, host.shape)] = host.reshape(-1)[index] * CORRUPTION  # in place, views too
    if on_gpu:  # before the next work, on whatever stream, reads it
        output.device.synchronize()
    _mark_fired()
    if not _said_corrupt:
        _say(f"injecting corrupt at phase {fault.phase} ({what} element {index} of {host.size} times {CORRUPTION})")
        _said_corrupt = True


def visible_free_memory(free: int, need: int, where: str, device: str) -> int:
    """The free memory a check sees: a quarter of ``need`` when an oom fault is armed for this check
    (``where`` is 'host' or 'device'; on a CPU run device buffers are host memory too)."""
    fault = _armed
    if fault is None or fault.kind != "oom":
        return free
    hits = (fault.phase == "read" and where == "host") or (
        fault.phase == "h2d" and (where == "device" or device == "cpu")
    )
    if not hits:
        return free
    _mark_fired()
    _say(f"injecting oom at the {where} memory check (free memory shown as a quarter of the need)")
    return min(free, need // 4)


def _mark_fired() -> None:
    global _fired
    _fired = True


def _say(what: str) -> None:
    print(f"spmd: {_where}: SPMD_FAULT: {what}", file=sys.stderr, flush=True)

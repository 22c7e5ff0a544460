"""The watchdog: no rank waits for ever in a collective, and a hang says where every rank is.

Every blocking call spmd makes on MPI goes through a ``comm.watched.WatchedComm``, and every wait for
the GPU (where NCCL work completes) through ``waits.Waiting``: each marks "waiting in X since t". A
daemon thread on each rank sends its marker (phase, what it waits in, for how long) to rank 0 every
``beat_s`` over a private communicator: the out-of-band heartbeat. When some rank has waited longer
than ``timeout_s``, rank 0 prints where every rank is and aborts the job (exit 4). A phase of a run (read,
compute, ...) is timed too: when no rank waits in a collective, which would have caught it, a rank in one
phase for longer than ``timeout_s`` (a read or a compute step that never returns on every rank) ends
the job the same way. A rank whose wait or phase outlives ``timeout_s`` plus a grace period (rank 0
itself is gone or wedged) ends the job alone. Last, for a hang in C code that holds the GIL (HDF5 in a
read that never returns), when this thread itself cannot run: ``faulthandler``, re-armed on every beat,
prints every thread's stack and ends the process ``timeout_s + BACKSTOP_S`` after the last beat.

Libraries with state of their own register hooks here instead of being imported by it. ``on_poll`` is
called every beat (NCCL's asynchronous errors). ``on_abort`` is run by ``end_job``, the one way a job is
ended on an error, by the watchdog or by a failing rank, so NCCL communicators are aborted, not leaked.

It needs MPI_THREAD_MULTIPLE (mpi4py asks for it; MPICH and Open MPI give it); without it each
rank judges only itself and leaves by ``os._exit``, which the launcher turns into the job's end.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
import traceback
from typing import Callable

from mpi4py import MPI

from . import stops, waits
from .files import remove_own_temps

EXIT_CODE = 4
BEAT_TAG, BYE_TAG = 1, 2
GRACE_S = 10.0  # how long past timeout_s a rank waits for rank 0 to end the job before it does
FORWARD_S = 0.5  # time for the launcher to forward the last message before MPI_Abort kills the job
BACKSTOP_S = 2 * GRACE_S  # past timeout_s without a beat (the GIL held by a stuck C call): faulthandler ends it

_poll_hooks: list[tuple[str, Callable[[], None]]] = []
_abort_hooks: list[tuple[str, Callable[[], bool]]] = []


def on_poll(what: str, hook: Callable[[], None]) -> None:
    """Call ``hook`` on every heartbeat of a running watchdog (from its thread); an exception it
    raises ends the job as ``what`` (e.g. 'NCCL asynchronous error'). Registering twice is a no-op."""
    if (what, hook) not in _poll_hooks:
        _poll_hooks.append((what, hook))


def on_abort(what: str, hook: Callable[[], bool]) -> None:
    """Call ``hook`` before ``end_job`` aborts the job; it returns False when ``what`` (e.g.
    'ncclCommAbort') did not finish in time. Registering twice is a no-op."""
    if (what, hook) not in _abort_hooks:
        _abort_hooks.append((what, hook))


class Watchdog:
    """The watchdog of one rank (one per process; see ``start``).

    Attributes:
        timeout_s: the longest a rank may wait in one collective, or stay in one phase of a run.
        phase: the phase this rank is in (what the heartbeat reports).
    """

    def __init__(self, world: MPI.Intracomm, hosts: list[str], timeout_s: float):
        self.world = world  # what Abort ends: the whole launch
        self.beats = world.Dup()  # private: heartbeats never mix with the job's messages
        self.rank, self.size, self.hosts = world.Get_rank(), world.Get_size(), hosts
        self.timeout_s = timeout_s
        self._phase: tuple[str, float, bool] = ("start", time.monotonic(), False)  # (name, since, timed)
        self.ending = False  # set once the watchdog has decided to end the job
        self.threaded_mpi = MPI.Query_thread() == MPI.THREAD_MULTIPLE
        self._wait: tuple[str, float, bool] | None = None  # (what, since, timed): one reference, read whole
        self._depth = 0
        self._pending: list[MPI.Request] = []
        self._heard: dict[int, tuple[tuple, float]] = {}  # rank 0: rank -> (marker, when received)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="spmd-watchdog", daemon=True)
        self._thread.start()

    @property
    def beat_s(self) -> float:
        return min(1.0, self.timeout_s / 10)

    # -- what the main thread marks ----------------------------------------------------------

    @property
    def phase(self) -> str:
        return self._phase[0]

    def note_phase(self, name: str, timed: bool = True) -> None:
        """This rank entered phase ``name``; ``timed``: a phase of a run, which may not outlast timeout_s."""
        self._phase = (name, time.monotonic(), timed)  # replaced whole, like a wait

    def enter(self, what: str, timed: bool = True) -> None:
        if self._depth == 0:
            self._wait = (what, time.monotonic(), timed)
        self._depth += 1

    def leave(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._wait = None

    def marker(self) -> tuple[str, str | None, float | None, bool, float | None]:
        """(phase, what this rank waits in or None, for how many seconds or None, whether the wait
        is timed, for how many seconds this rank has been in a timed phase or None)."""
        wait, (phase, entered, phase_timed) = self._wait, self._phase  # each replaced whole by the main thread
        now = time.monotonic()
        in_phase = now - entered if phase_timed else None
        if wait is None:
            return phase, None, None, True, in_phase
        what, since, timed = wait
        return phase, what, now - since, timed, in_phase

    # -- the thread ------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.beat_s):
                self.arm_backstop()
                self._poll()
                if stops.end_now(grace_s=self.timeout_s):
                    self.interrupt()
                if not self.threaded_mpi:
                    self._judge_self(grace=0.0)
                elif self.rank == 0:
                    self._judge_all()
                else:
                    self._beat()
                    self._judge_self(grace=GRACE_S)
        except Exception:  # the watchdog must never be what kills a healthy job
            faulthandler.cancel_dump_traceback_later()
            print(
                f"spmd: warning: rank {self.rank}: the watchdog stopped:\n{traceback.format_exc()}",
                file=sys.stderr,
                flush=True,
            )

    def arm_backstop(self) -> None:
        """(Re)start faulthandler's countdown (its own C thread, which needs no GIL): if no beat re-arms it
        within timeout_s + BACKSTOP_S, every thread's stack is printed and the process exits (1)."""
        faulthandler.dump_traceback_later(self.timeout_s + BACKSTOP_S, exit=True)  # replaces the last one

    def _beat(self) -> None:
        # issend: a beat completes only once rank 0 received it, so shutdown can account for every one
        self._pending.append(self.beats.issend(self.marker(), dest=0, tag=BEAT_TAG))
        self._pending = [r for r in self._pending if not r.Test()]

    def _judge_all(self) -> None:
        status = MPI.Status()
        while self.beats.iprobe(source=MPI.ANY_SOURCE, tag=BEAT_TAG, status=status):
            source = status.Get_source()
            self._heard[source] = (self.beats.recv(source=source, tag=BEAT_TAG), time.monotonic())
        now = time.monotonic()
        self._heard[0] = (self.marker(), now)
        waited = {r: age + (now - t) for r, ((_, what, age, timed, _), t) in self._heard.items() if what and timed}
        stuck = [r for r, age in waited.items() if age > self.timeout_s]
        if stuck:
            first = max(stuck, key=waited.get)
            (phase, what, *_), _ = self._heard[first]
            self.end(
                self._table(
                    f"rank {first} on {self.hosts[first]} waited {waited[first]:.1f} s (timeout_s: "
                    f"{self.timeout_s:g}) in {what}, phase {phase}",
                    now,
                    waiting=True,
                )
            )
        if waited:
            return  # a phase that does not end shows as a peer's wait: that rule names it
        in_phase = {
            r: age + (now - t) for r, ((_, what, _, _, age), t) in self._heard.items() if age is not None and not what
        }
        over = [r for r, age in in_phase.items() if age > self.timeout_s]
        if over:
            first = max(over, key=in_phase.get)
            (phase, *_), _ = self._heard[first]
            self.end(
                self._table(
                    f"rank {first} on {self.hosts[first]} has been in phase {phase} for "
                    f"{in_phase[first]:.1f} s (timeout_s: {self.timeout_s:g}) and no rank waits in a "
                    f"collective: a step that never returns",
                    now,
                    waiting=False,
                )
            )

    def _judge_self(self, grace: float) -> None:
        phase, what, age, timed, in_phase = self.marker()
        why = "" if not grace else f"; rank 0 did not end the job within {grace:.0f} s more"
        where = f"watchdog: rank {self.rank} on {self.hosts[self.rank]}"
        if what and timed and age > self.timeout_s + grace:
            self.end(
                f"{where} waited {age:.1f} s (timeout_s: {self.timeout_s:g}) in {what}, phase {phase}{why}: "
                f"ending the job (exit {EXIT_CODE})"
            )
        if not what and in_phase is not None and in_phase > self.timeout_s + grace:
            self.end(
                f"{where} has been in phase {phase} for {in_phase:.1f} s (timeout_s: {self.timeout_s:g}) "
                f"without finishing it{why}: ending the job (exit {EXIT_CODE})"
            )

    def _table(self, headline: str, now: float, waiting: bool) -> str:
        """``headline``, then where every rank is; ``waiting``: the headline is a rank's wait in a
        collective (then the ranks that never reached it are named)."""
        lines = [f"watchdog: {headline}. Where every rank is:"]
        absent = []
        for r in range(self.size):
            where = f"rank {r} on {self.hosts[r]}"
            if r not in self._heard:
                lines.append(f"  {where}: never heard from (died or never started?)")
                absent.append(r)
                continue
            (p, w, a, timed, _), t = self._heard[r]
            silent = now - t
            state = f"waiting in {w} for {a + silent:.1f} s" if w else "not in a collective"
            if w and not timed:
                state += " (idle: not in this run)"
            dead = f", silent for {silent:.1f} s (dead or wedged?)" if silent > 3 * self.beat_s + 1 else ""
            lines.append(f"  {where}: phase {p}, {state}{dead}")
            if not w or dead:
                absent.append(r)
        if absent and waiting:
            lines.append(f"ranks that never reached it: {', '.join(map(str, absent))} (see above)")
        lines.append(f"ending the job (exit {EXIT_CODE}); raise timeout_s if a phase legitimately takes longer")
        return "\n".join(lines)

    def _poll(self) -> None:
        for what, hook in list(_poll_hooks):
            try:
                hook()
            except Exception as exc:  # NcclError: a peer died, a network error, an abort elsewhere
                self.end(f"rank {self.rank} on {self.hosts[self.rank]}: {what} in phase {self.phase}: {exc}")

    def interrupt(self) -> None:
        """Ctrl-C: one line, rank 0's, then the job ends with exit 130 on every rank. The other ranks
        leave the ending to rank 0 (whose line would be lost if they aborted first), for a grace period."""
        self.ending = True
        if self.rank == 0:
            print(f"spmd: interrupted (SIGINT): ending the job (exit {stops.EXIT_CODE})", file=sys.stderr, flush=True)
        elif self.threaded_mpi:
            time.sleep(GRACE_S)
        end_job(self.world if self.threaded_mpi else None, stops.EXIT_CODE)

    def end(self, message: str) -> None:
        """Print ``message``, end the whole job (``end_job``). Never returns."""
        self.ending = True  # the main thread's errors from here on (an aborted NCCL call) are echoes
        print(f"spmd: error: {message}", file=sys.stderr, flush=True)
        end_job(self.world if self.threaded_mpi else None, EXIT_CODE)

    # -- shutdown --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop watching; collective over the launch. The thread keeps watching until every rank
        got here; then every beat sent is received, so no message is left in flight."""
        self.enter("watchdog shutdown")
        self.beats.Barrier()
        self.leave()
        self._stop.set()
        self._thread.join()
        faulthandler.cancel_dump_traceback_later()
        if self.threaded_mpi and self.rank == 0:
            status = MPI.Status()
            for source in range(1, self.size):  # each rank's beats arrive in order, then its bye
                while True:
                    self.beats.recv(source=source, tag=MPI.ANY_TAG, status=status)
                    if status.Get_tag() == BYE_TAG:
                        break
        elif self.threaded_mpi:
            self.beats.send(None, dest=0, tag=BYE_TAG)
            MPI.Request.Waitall(self._pending)
        self.beats.Free()


def end_job(world: MPI.Intracomm | None, code: int) -> None:
    """End every rank of the launch with ``code``: the abort hooks first (no NCCL kernel left waiting
    for a dead peer, no communicator leaked), then MPI_Abort (without ``world``, this process alone,
    which the launcher turns into the job's end). Never returns. The launcher forwards each rank's
    output asynchronously and stops forwarding when it kills: the pause lets the last message through."""
    rank = MPI.COMM_WORLD.Get_rank()
    remove_own_temps()  # MPI_Abort runs no finally: a file being written goes now
    for what, hook in list(_abort_hooks):
        try:
            finished = hook()
        except Exception as exc:  # the job ends either way
            print(f"spmd: rank {rank}: {what} failed ({exc}); ending the job anyway", file=sys.stderr, flush=True)
            continue
        if not finished:
            print(
                f"spmd: rank {rank}: {what} did not return in time; ending the job anyway", file=sys.stderr, flush=True
            )
    sys.stdout.flush()
    sys.stderr.flush()
    time.sleep(FORWARD_S)
    if world is not None:
        world.Abort(code)
    os._exit(code)


def start(world: MPI.Intracomm, hosts: list[str], timeout_s: float = 300.0) -> Watchdog:
    """Start this process's watchdog (collective over ``world``); one per process."""
    dog = waits.installed()
    if dog is None:
        dog = Watchdog(world, hosts, timeout_s)
        waits.install(dog)
        dog.arm_backstop()  # now: the main thread may hold the GIL before the first beat
    return dog


def stop() -> None:
    """Stop this process's watchdog, if one runs (collective over the launch)."""
    dog = waits.installed()
    if dog is not None:
        waits.install(None)
        dog.stop()


def ending() -> bool:
    """True once this rank's watchdog is ending the job: an error the main thread meets now (NCCL
    calls fail once aborted) is a consequence, and the watchdog's exit code and message stand."""
    dog = waits.installed()
    return dog is not None and dog.ending


def set_timeout(seconds: float) -> None:
    dog = waits.installed()
    if dog is not None:
        dog.timeout_s = seconds
        dog.arm_backstop()

"""The watchdog's judgement on rank 0, from heartbeats (no launch needed: COMM_SELF, the thread stopped,
the other ranks' markers written in by hand)."""

from __future__ import annotations

import time

import pytest
from mpi4py import MPI

from spmd.core.watchdog import Watchdog


class Ended(Exception):
    pass


@pytest.fixture
def dog(monkeypatch):
    dog = Watchdog(MPI.COMM_SELF, ["a"], timeout_s=10.0)
    dog._stop.set()
    dog._thread.join()
    dog.size, dog.hosts = 4, ["a", "a", "b", "b"]

    def end(message):
        raise Ended(message)

    monkeypatch.setattr(dog, "end", end)
    yield dog
    dog.beats.Free()


def heard(dog, rank, phase, what, age, timed=True, silent=0.0, in_phase=None):
    dog._heard[rank] = ((phase, what, age, timed, in_phase), time.monotonic() - silent)


def test_no_rank_past_timeout_is_left_alone(dog):
    dog.enter("Allgather")
    heard(dog, 1, "comm", "Allgather", 9.0)
    heard(dog, 2, "compute", None, None)
    heard(dog, 3, "comm", "Allgather", 2.0)
    dog._judge_all()  # no Ended


def test_a_timed_wait_past_timeout_ends_the_job_naming_every_rank(dog):
    dog.note_phase("comm")
    dog.enter("Allgather")
    heard(dog, 1, "comm", "Allgather", 12.0)
    heard(dog, 2, "compute", None, None)
    heard(dog, 3, "read", None, None, silent=30.0)
    with pytest.raises(Ended) as ended:
        dog._judge_all()
    text = str(ended.value)
    assert text.startswith("watchdog: rank 1 on a waited 12.0 s (timeout_s: 10) in Allgather, phase comm.")
    assert "rank 2 on b: phase compute, not in a collective" in text
    assert "rank 3 on b: phase read, not in a collective, silent for 30.0 s (dead or wedged?)" in text
    assert "ranks that never reached it: 2, 3 " in text


def test_idle_ranks_of_a_sweep_are_shown_but_never_timed(dog):
    dog.enter("idle barrier", timed=False)
    heard(dog, 1, "comm", "idle barrier", 500.0, timed=False)
    heard(dog, 2, "compute", None, None)
    heard(dog, 3, "compute", None, None)
    dog._judge_all()  # ranks 2 and 3 run a long size: no Ended
    heard(dog, 3, "comm", "Allgather", 11.0)
    with pytest.raises(
        Ended,
        match=r"rank 1 on a: phase comm, waiting in idle barrier for 500\.\d s "
        r"\(idle: not in this run\)",
    ):
        dog._judge_all()


def test_a_rank_never_heard_from_is_named(dog):
    dog.enter("Barrier")
    what, since, timed = dog._wait
    dog._wait = (what, since - 11.0, timed)
    with pytest.raises(Ended, match="rank 1 on a: never heard from"):
        dog._judge_all()


def test_a_phase_no_rank_leaves_ends_the_job_when_nobody_waits(dog):
    """Every rank blocked in a read (or a compute step) outside any collective: no wait to time, so the
    phase itself is timed."""
    dog.note_phase("read")
    dog._phase = ("read", time.monotonic() - 3.0, True)
    heard(dog, 1, "read", None, None, in_phase=11.5)
    heard(dog, 2, "read", None, None, in_phase=9.0)
    heard(dog, 3, "setup", None, None, in_phase=None)  # not a timed phase: between runs, or before one
    with pytest.raises(Ended) as ended:
        dog._judge_all()
    text = str(ended.value)
    assert text.startswith(
        "watchdog: rank 1 on a has been in phase read for 11.5 s (timeout_s: 10) and no rank "
        "waits in a collective: a step that never returns. Where every rank is:"
    )
    assert "rank 2 on b: phase read, not in a collective" in text and "never reached" not in text


def test_a_long_phase_beside_a_waiting_rank_is_left_to_the_wait_rule(dog):
    """The wait rule names the rank that waits for the stuck one (the message the fault tests expect)."""
    dog.note_phase("comm")
    dog.enter("Allgather")
    heard(dog, 1, "compute", None, None, in_phase=10.5)
    heard(dog, 2, "comm", "Allgather", 9.8)
    heard(dog, 3, "comm", "Allgather", 9.8)
    dog._judge_all()  # nobody waited 10 s yet: no Ended
    heard(dog, 2, "comm", "Allgather", 10.2)
    with pytest.raises(Ended, match="rank 2 on b waited 10.2 s"):
        dog._judge_all()


def test_phases_outside_a_run_are_never_timed(dog):
    dog.note_phase("done", timed=False)
    dog._phase = ("done", time.monotonic() - 500.0, False)
    for r in (1, 2, 3):
        heard(dog, r, "start", None, None, in_phase=None)
    dog._judge_all()  # no Ended
    assert dog.marker()[4] is None

"""The watchdog's judgement on rank 0, from heartbeats (no launch needed: COMM_SELF, the thread stopped,
the other ranks' markers written in by hand)."""

from __future__ import annotations

import time

import pytest
from mpi4py import MPI

from spmd.watchdog import Watchdog


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


def heard(dog, rank, phase, what, age, timed=True, silent=0.0):
    dog._heard[rank] = ((phase, what, age, timed), time.monotonic() - silent)


def test_no_rank_past_timeout_is_left_alone(dog):
    dog.enter("Allgather")
    heard(dog, 1, "comm", "Allgather", 9.0)
    heard(dog, 2, "compute", None, None)
    heard(dog, 3, "comm", "Allgather", 2.0)
    dog._judge_all()  # no Ended


def test_a_timed_wait_past_timeout_ends_the_job_naming_every_rank(dog):
    dog.phase = "comm"
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
    with pytest.raises(Ended, match=r"rank 1 on a: phase comm, waiting in idle barrier for 500\.\d s "
                                    r"\(idle: not in this run\)"):
        dog._judge_all()


def test_a_rank_never_heard_from_is_named(dog):
    dog.enter("Barrier")
    what, since, timed = dog._wait
    dog._wait = (what, since - 11.0, timed)
    with pytest.raises(Ended, match="rank 1 on a: never heard from"):
        dog._judge_all()

"""One clock for every rank: each rank's perf_counter offset from rank 0's, agreed through MPI.

Rank 0 exchanges a few ping-pongs with each rank in turn (NTP's method): in the round with the shortest round
trip, rank k's reading is taken to be at the midpoint of rank 0's send and receive, so its offset is known to
within half that round trip (its uncertainty, kept with it). A timestamp t of rank k is t - offset_k on rank 0's
clock. perf_counter is CLOCK_MONOTONIC: its rate is the same on every host; only the origin differs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

ROUNDS = 8


@dataclass(frozen=True)
class Clock:
    """This rank's clock against rank 0's: ``offset`` (seconds to subtract from its perf_counter) and
    ``uncertainty`` (half the shortest round trip), and the same for every rank (``offsets``, ``uncertainties``,
    known on every rank)."""

    offset: float
    uncertainty: float
    offsets: tuple[float, ...]
    uncertainties: tuple[float, ...]

    def shared(self, t: float) -> float:
        """A perf_counter reading of this rank on rank 0's clock."""
        return t - self.offset

    def to_dict(self) -> dict:
        return {
            "reference": "rank 0's perf_counter (CLOCK_MONOTONIC)",
            "method": f"ping-pong, best of {ROUNDS}",
            "offsets_s": list(self.offsets),
            "uncertainty_s": list(self.uncertainties),
        }


def agree_clock(comm, rounds: int = ROUNDS) -> Clock:
    """Every rank's offset from rank 0's perf_counter (collective over ``comm``)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    table = np.zeros((size, 2))  # offset, uncertainty per rank
    buf = np.zeros(1)
    if rank == 0:
        for peer in range(1, size):
            best = (np.inf, 0.0)
            for _ in range(rounds):
                t0 = time.perf_counter()
                comm.Send([buf, MPI.DOUBLE], dest=peer, tag=71)
                comm.Recv([buf, MPI.DOUBLE], source=peer, tag=72)
                t1 = time.perf_counter()
                if t1 - t0 < best[0]:
                    best = (t1 - t0, buf[0] - (t0 + t1) / 2)
            table[peer] = (best[1], best[0] / 2)
    else:
        for _ in range(rounds):
            comm.Recv([buf, MPI.DOUBLE], source=0, tag=71)
            buf[0] = time.perf_counter()
            comm.Send([buf, MPI.DOUBLE], dest=0, tag=72)
    comm.Bcast([table, MPI.DOUBLE], root=0)
    return Clock(
        float(table[rank, 0]), float(table[rank, 1]), tuple(map(float, table[:, 0])), tuple(map(float, table[:, 1]))
    )


def local_clock() -> Clock:
    """A one-rank job's clock: its own."""
    return Clock(0.0, 0.0, (0.0,), (0.0,))

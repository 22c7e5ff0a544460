"""Collectives as nccl-tests counts them, and a timer for them on any Communicator.

``size`` is the message size nccl-tests reports (allgather: the gathered output;
reduce_scatter: the input of one rank); ``busbw = size / time x bus_factor`` is what
each link carried, comparable across collectives and rank counts. The same terms give
the alpha-beta model ``time = alpha x steps + size x bus_factor / bandwidth``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import xp as xpmod


@dataclass(frozen=True)
class Collective:
    """The cost terms of one collective on ``n`` ranks (ring algorithms).

    Attributes:
        steps: latency terms (message rounds) on n ranks.
        bus_factor: nccl-tests' factor from algorithm bandwidth to bus bandwidth.
        size: nccl-tests' message size for n ranks each holding ``m`` bytes.
    """

    steps: Callable[[int], float]
    bus_factor: Callable[[int], float]
    size: Callable[[int, int], int]


COLLECTIVES = {
    "allreduce": Collective(lambda n: 2 * (n - 1), lambda n: 2 * (n - 1) / n, lambda n, m: m),
    "allgather": Collective(lambda n: n - 1, lambda n: (n - 1) / n, lambda n, m: n * m),
    "reduce_scatter": Collective(lambda n: n - 1, lambda n: (n - 1) / n, lambda n, m: m),
    "bcast": Collective(lambda n: math.ceil(math.log2(n)) if n > 1 else 0,
                        lambda n: 1.0 if n > 1 else 0.0, lambda n, m: m),
    "sendrecv": Collective(lambda n: 1 if n > 1 else 0, lambda n: 1.0 if n > 1 else 0.0, lambda n, m: m),
}


def model_terms(op: str, ranks: int, nbytes: int) -> tuple[float, float]:
    """(latency steps, bytes over the busiest link) of ``op`` with ``nbytes`` per rank."""
    c = COLLECTIVES[op]
    return float(c.steps(ranks)), c.size(ranks, nbytes) * c.bus_factor(ranks)


def call(comm, op: str, x, scratch):
    """Run collective ``op`` once on buffer ``x`` (``scratch``: receive buffer of sendrecv)."""
    if op == "allreduce":
        return comm.allreduce(x)
    if op == "allgather":
        return comm.allgather(x)
    if op == "reduce_scatter":
        return comm.reduce_scatter(x)
    if op == "bcast":
        return comm.bcast(x, root=0)
    if op == "sendrecv":
        n = comm.size
        ring = n > 1
        return comm.sendrecv(x, (comm.rank + 1) % n if ring else None, scratch,
                             (comm.rank - 1) % n if ring else None)
    raise ValueError(f"unknown collective {op!r} (one of {', '.join(COLLECTIVES)})")


def time_collective(comm, xp, op: str, nbytes: int, dtype="float32", warmup: int = 2,
                    target_s: float = 0.02, max_iters: int = 50) -> float:
    """Seconds per call of ``op`` with ``nbytes`` per rank: the slowest rank's average
    over enough calls to fill about ``target_s`` (at least 3, at most ``max_iters``)."""
    itemsize = np.dtype(dtype).itemsize
    count = max(1, nbytes // itemsize)
    if op == "reduce_scatter":
        count = max(comm.size, count // comm.size * comm.size)
    x = xp.ones(count, dtype=dtype)
    scratch = xp.empty_like(x)
    for _ in range(warmup):
        call(comm, op, x, scratch)
    comm.barrier()
    start = time.perf_counter()
    call(comm, op, x, scratch)
    xpmod.synchronize(xp)
    once = float(comm.allreduce(np.array([time.perf_counter() - start]), op="max")[0])
    iters = int(min(max_iters, max(3, target_s // max(once, 1e-9))))
    comm.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call(comm, op, x, scratch)
    xpmod.synchronize(xp)
    mine = (time.perf_counter() - start) / iters
    return float(comm.allreduce(np.array([mine]), op="max")[0])


def probe_sizes(max_bytes: int, min_bytes: int = 8, factor: int = 8) -> list[int]:
    """Message sizes (bytes per rank) from ``min_bytes`` up to ``max_bytes``, geometric."""
    sizes, m = [], min_bytes
    while m <= max_bytes:
        sizes.append(m)
        m *= factor
    return sizes

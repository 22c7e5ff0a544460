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

from ..core import xp as xpmod


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
    "gather": Collective(lambda n: n - 1, lambda n: (n - 1) / n, lambda n, m: n * m),
    "reduce_scatter": Collective(lambda n: n - 1, lambda n: (n - 1) / n, lambda n, m: m),
    "bcast": Collective(
        lambda n: math.ceil(math.log2(n)) if n > 1 else 0, lambda n: 1.0 if n > 1 else 0.0, lambda n, m: m
    ),
    "sendrecv": Collective(lambda n: 1 if n > 1 else 0, lambda n: 1.0 if n > 1 else 0.0, lambda n, m: m),
}


def model_terms(op: str, ranks: int, nbytes: int) -> tuple[float, float]:
    """(latency steps, bytes over the busiest link) of ``op`` with ``nbytes`` per rank."""
    c = COLLECTIVES[op]
    return float(c.steps(ranks)), c.size(ranks, nbytes) * c.bus_factor(ranks)


def call(comm, op: str, x, out):
    """Run collective ``op`` once from ``x`` into the preallocated result buffer ``out``
    (as nccl-tests does: allocating a result per call would be timed too)."""
    if op == "allreduce":
        return comm.allreduce(x, out=out)
    if op == "allgather":
        return comm.allgather(x, out=out)
    if op == "gather":
        return comm.gather(x, root=0, out=out if comm.rank == 0 else None)
    if op == "reduce_scatter":
        return comm.reduce_scatter(x, out=out)
    if op == "bcast":
        return comm.bcast(x, root=0, out=out)
    if op == "sendrecv":  # a ring shift: send right, receive from the left
        n = comm.size
        ring = n > 1
        return comm.sendrecv(x, (comm.rank + 1) % n if ring else None, out, (comm.rank - 1) % n if ring else None)
    raise ValueError(f"unknown collective {op!r} (one of {', '.join(COLLECTIVES)})")


def counts(op: str, size: int, itemsize: int, ranks: int) -> tuple[int, int]:
    """(elements each rank passes in, elements of the nccl-tests size) for ``size`` bytes.

    allgather's size is the gathered output and reduce_scatter's the input, so each rank
    holds size / ranks of it (rounded down to whole elements, at least one).
    """
    elements = max(1, size // itemsize)
    if op in ("allgather", "gather"):
        per_rank = max(1, elements // ranks)
        return per_rank, per_rank * ranks
    if op == "reduce_scatter":
        per_rank = max(1, elements // ranks) * ranks
        return per_rank, per_rank
    return elements, elements


def pattern(count: int, dtype, rank: int) -> np.ndarray:
    """Rank-specific small integers: sums over thousands of ranks stay exact in float32 and int32."""
    return (np.arange(count) % 13 + rank + 1).astype(dtype)


def expected(op: str, count: int, dtype, rank: int, ranks: int) -> np.ndarray:
    """What ``call(op)`` must return on ``rank`` when every rank passed ``pattern(count, rank)``."""
    if op == "allreduce":
        return sum(pattern(count, dtype, r).astype(np.float64) for r in range(ranks)).astype(dtype)
    if op == "allgather" or (op == "gather" and rank == 0):
        return np.stack([pattern(count, dtype, r) for r in range(ranks)])
    if op == "gather":  # only the root receives: the others' poisoned out stays as it was
        return np.full((ranks, count), -1, dtype=dtype)
    if op == "reduce_scatter":
        total = sum(pattern(count, dtype, r).astype(np.float64) for r in range(ranks)).astype(dtype)
        block = count // ranks
        return total[rank * block : (rank + 1) * block]
    if op == "bcast":
        return pattern(count, dtype, 0)
    if op == "sendrecv":
        return pattern(count, dtype, (rank - 1) % ranks) if ranks > 1 else np.full(count, -1, dtype=dtype)
    raise ValueError(f"unknown collective {op!r}")


def measure(
    comm,
    xp,
    op: str,
    size: int,
    dtype="float32",
    iters: int | None = None,
    warmup: int = 2,
    target_s: float = 0.02,
    max_iters: int = 50,
) -> dict:
    """Time ``iters`` back-to-back calls of ``op`` (nccl-tests' ``size`` in bytes), then check
    the last result on every rank.

    ``iters=None`` picks enough calls to fill about ``target_s`` (3 to ``max_iters``).

    Returns:
        {size, count, seconds (the slowest rank's average per call), wrong (elements wrong,
        summed over ranks)}.
    """
    itemsize = np.dtype(dtype).itemsize
    count, reported = counts(op, size, itemsize, comm.size)
    want = expected(op, count, dtype, comm.rank, comm.size)
    x = xp.asarray(pattern(count, dtype, comm.rank))
    out = xp.full(want.shape, -1, dtype=dtype)  # poisoned: a result never written shows
    for _ in range(warmup):
        call(comm, op, x, out)
    if iters is None:
        once = _timed(comm, xp, lambda: call(comm, op, x, out), 1)
        iters = int(min(max_iters, max(3, target_s // max(once, 1e-9))))
    if op != "sendrecv":  # sendrecv's out must keep -1 on a lone rank, which receives nothing
        out.fill(-1)
    seconds = _timed(comm, xp, lambda: call(comm, op, x, out), iters)
    got = xpmod.to_host(out)
    wrong = int(np.count_nonzero(got != want)) if got.shape == want.shape else int(want.size)
    wrong = int(comm.allreduce(np.array([wrong], dtype=np.int64))[0])
    return {"size": reported * itemsize, "count": reported, "seconds": seconds, "wrong": wrong}


def _timed(comm, xp, fn, iters: int) -> float:
    """The slowest rank's seconds per call of ``fn`` over ``iters`` calls, started together."""
    comm.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    xpmod.synchronize(xp)
    mine = (time.perf_counter() - start) / iters
    return float(comm.allreduce(np.array([mine]), op="max")[0])


def algbw_busbw(op: str, ranks: int, size: int, seconds: float) -> tuple[float, float]:
    """nccl-tests' algorithm and bus bandwidth in bytes per second."""
    algbw = size / seconds if seconds > 0 else 0.0
    return algbw, algbw * COLLECTIVES[op].bus_factor(ranks)


def probe_sizes(max_bytes: int, min_bytes: int = 8, factor: int = 8) -> list[int]:
    """Message sizes (bytes per rank) from ``min_bytes`` up to ``max_bytes``, geometric."""
    sizes, m = [], min_bytes
    while m <= max_bytes:
        sizes.append(m)
        m *= factor
    return sizes

"""What ranks at once on a node's cores cost each other, for ``spmd predict`` on CPUs (``spmd bench comm --links``).

A CPU rank's compute shares its node with the others': the memory bandwidth, the last-level cache, the cores'
clocks and, where the CPUs are hardware threads, the cores themselves. A sweep of one or two ranks does not show
what four or eight at once do (the held-out CPU rounds, docs/validation.md: a pair barely slowed where four and eight
ranks did severalfold). So the target's link test measures it: three kernels a CPU phase is made of, a
memory-bound stream, an elementwise pass over a cache-sized block and a matrix product, each timed on the node's
first rank alone, on the compute threads a rank of the node gets, while the others sleep, then on every rank at once.
A phase is some mix of them: ``spmd predict`` charges a phase the kernels' geometric-mean slowdown and puts the
fastest and slowest kernel's at the ends of its interval.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

STREAM_ELEMENTS = 4 << 20  # float64, 32 MiB an array: c = a + b meets the node's memory bandwidth
CACHED_ELEMENTS = 32 << 10  # float64, 256 KiB an array: a core's cache holds the pass, which meets the cores' clocks
MATMUL_N = 384  # a float64 product on the rank's compute threads: the cores' arithmetic
MIN_SECONDS = 0.1  # a round times as many calls of a kernel as take this long alone


def _kernels() -> dict:
    """name -> a call of that kernel on this rank's own arrays (allocated and touched here)."""
    a, b, c = (np.full(STREAM_ELEMENTS, x, np.float64) for x in (1.0, 2.0, 0.0))
    d, e, f = (np.full(CACHED_ELEMENTS, x, np.float64) for x in (1.0, 2.0, 0.0))
    rng = np.random.default_rng(0)
    m, n, out = rng.random((MATMUL_N, MATMUL_N)), rng.random((MATMUL_N, MATMUL_N)), np.empty((MATMUL_N, MATMUL_N))
    return {
        "stream": lambda: np.add(a, b, out=c),
        "cached": lambda: [np.add(d, e, out=f) for _ in range(64)],
        "matmul": lambda: np.matmul(m, n, out=out),
    }


def node_cores(ctx, rounds: int = 7) -> dict | None:
    """{ranks (on the busiest node), threads (a rank's compute threads), kernels {name: {alone_s, together_s,
    slowdown}}, slowdown (the kernels' geometric mean), low, high (the least and most slowed kernel's)}: each
    kernel's call count fixed by the first rank alone, then ``rounds`` rounds of it alone and of every rank at once
    by turns, the median of the slowest rank's. None where no host holds two ranks (emulated nodes on one host are
    that host's ranks: ``node_comm``). Collective over ``ctx.comm``."""
    busiest = max(ctx.comm.allgather(ctx.local_size))
    if busiest < 2:
        return None
    kernels = _kernels()
    first = ctx.local_rank == 0
    out = {}
    for name, call in kernels.items():
        call()  # warm: pages touched, BLAS's threads started
        calls = _calls(call) if first else 0
        calls = max(ctx.comm.allgather(calls))  # every node's first rank; the most any needed
        alone, together = [], []
        for _ in range(rounds):  # by turns, so that a drift of the node's clocks or neighbours falls on both
            alone.append(_timed(ctx, call if first else None, calls))
            together.append(_timed(ctx, call, calls))
        a, t = statistics.median(alone), statistics.median(together)
        out[name] = {"alone_s": a, "together_s": t, "slowdown": t / a}
    slowdowns = [k["slowdown"] for k in out.values()]
    return {
        "ranks": busiest,
        "threads": ctx.threads.count if ctx.threads else None,
        "kernels": out,
        "slowdown": math.exp(statistics.fmean(math.log(s) for s in slowdowns)),
        "low": min(slowdowns),
        "high": max(slowdowns),
    }


def _calls(call) -> int:
    """How many calls of ``call`` take MIN_SECONDS on this rank alone (the other ranks sleep meanwhile)."""
    count, elapsed = 1, 0.0
    while elapsed < MIN_SECONDS:
        count = count if elapsed == 0.0 else max(count + 1, int(count * MIN_SECONDS / max(elapsed, 1e-9)) + 1)
        t0 = time.perf_counter()
        for _ in range(count):
            call()
        elapsed = time.perf_counter() - t0
    return count


def _timed(ctx, call, calls: int) -> float:
    """The slowest rank's seconds a call over ``calls`` calls of ``call``, every rank starting together (``call``
    None: this rank sleeps in the barrier, leaving its cores to those that work: MPI's blocking barrier would spin
    one)."""
    ctx.idle_barrier(timed=False)
    t0 = time.perf_counter()
    if call is not None:
        for _ in range(calls):
            call()
    elapsed = np.array([(time.perf_counter() - t0) / calls if call is not None else 0.0])
    ctx.idle_barrier(timed=False)  # the workers' own times: the sleepers' wake-up is not in them
    ctx.allreduce_host(elapsed, op="max")
    return float(elapsed[0])


def format_cores(cores: dict) -> list[str]:
    """A line per kernel of a ``node_cores`` measurement, then the slowdown a prediction charges."""
    threads = f", {cores['threads']} compute thread(s) a rank" if cores.get("threads") else ""
    lines = [f"# the node's cores: {cores['ranks']} rank(s) at once against one alone{threads}"]
    for name, k in cores["kernels"].items():
        lines.append(
            f"#   {name:>7}: {k['alone_s'] * 1e3:.3f} ms alone, {k['together_s'] * 1e3:.3f} ms at once "
            f"(x{k['slowdown']:.2f})"
        )
    lines.append(f"#   a phase is charged x{cores['slowdown']:.2f} (x{cores['low']:.2f} to x{cores['high']:.2f})")
    return lines

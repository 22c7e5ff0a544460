"""Collectives on a machine of nodes: the links inside a node and between nodes, and what a collective costs
over them, as NCCL's own tuning model charges it (src/graph/tuning.cc).

A call pays a base latency once and a latency per ring step (NCCL's baseLat and hwLat): a ring over ``g``
ranks on each of ``n`` nodes takes the steps ``measure.collectives`` counts; of them, ``2 (n - 1)``
(allreduce) or ``n - 1`` (allgather, reduce_scatter) cross a node boundary and pay the network's latency,
the rest the node's. Every byte goes round the whole ring, so its bus bandwidth is that of
the slowest link it crosses. NCCL's tree allreduce pays ``2 ((g - 1) intra + log2(n) inter)`` in latency at
0.9 of the bus bandwidth, twice the bytes of a ring's algorithm bandwidth; NCCL takes the faster of the two,
and so does this model. Point-to-point halos between neighbours cross one boundary once nodes are more than one.

A link measured by ``spmd bench comm --links`` keeps the curves it was measured by. Two terms cannot follow
NCCL's protocols over the sizes (LL, LL128 and Simple each take a range; sockets add a cost per call), so each
collective's modelled time is scaled by what the measured curve says of the model at the same bytes per link:
exact on the machine as measured, the ring and tree terms carrying it to other rank and node counts. Two ranks
cannot tell a call's base from its steps' (their count is fixed there), so a measured link's step costs NCCL's
latency for its kind of link and the base takes the rest of the smallest messages' time: a carried call adds only
the steps it adds, where a latency per step read off 2 ranks had tripled a 4-rank call's. A halo's
sendrecv runs NCCL's point-to-point transport, whose cost per call (a launch, a handshake with the peer) is not
a collective's latency per ring step: it is held to the ring shift measured on the same level, where there is one.

MPI's collectives (``spmd bench comm --backend mpi`` or ``mpi-cuda``: a link's ``library``) take no ring's steps for
their latency: MPICH and Open MPI run a small allreduce by recursive doubling and an allgather, gather or
reduce-scatter in as many rounds (Bruck's, a binomial tree, recursive halving), so a call pays a round per doubling of
the ranks (``mpi_steps``), each MPI_STEP_LATENCY_S, where a ring's 2 (p - 1) steps had carried a 2-rank test's call to
8 ranks at half as much again as it took. Each round of a recursive doubling passes the whole message, so below
MPI_DOUBLING_BYTES an allreduce puts a message a round over the busiest link; beyond it a ring's bytes (Rabenseifner's
halving and doubling move as many). Two ranks cannot tell the two apart (one round, one message), so the switch is
this one library's (``mpi_volume``). And what a call's protocols add beyond the two terms is read off MPI's curve
inside a node at the call's own bytes a rank, not at the bytes a link carries: host MPI copies through memory, and
whether a rank's buffers still sit in its caches is set by their size, so the step of the 2-rank curve where they
leave them lies at the same bytes a rank on any ranks. Read at a ring's bytes over a link, an 8 MiB allreduce on 8
ranks had been priced by the 2-rank call of 14 MiB, beyond that step, and came out 43% too slow.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ...measure.collectives import model_terms

GATHERS = ("allgather", "gather")
SMALL_SIZES = 4  # the latency comes from the smallest this many sizes measured
TREE_BANDWIDTH = 0.9  # NCCL's tree allreduce: this share of the bus bandwidth (tuning.cc), its algbw half of it
# NCCL's tuning model (src/graph/tuning.cc), its LL protocol's ring: a call's base latency and a step's by kind of link
BASE_LATENCY_S = 3.6e-6
STEP_LATENCY_S = {"nvlink": 0.47e-6, "pci": 1.0e-6, "net": 2.7e-6}
NVLINK_CLASS_BPS = 63e9  # a node's links faster than PCIe Gen5 x16 each way are NVLink's kind
# A round of MPI's recursive doubling inside a node: what each doubling of the ranks added to the smallest calls of
# host MPI (Open MPI 4.1) on the 16-core node of the CPU rounds 1-10, 120 launches each at 2, 4 and 8 ranks (the
# allreduce's medians 1.8-1.9 us a doubling, the allgather's 1.6-1.7: bench.tools.mpi_steps_design)
MPI_STEP_LATENCY_S = 1.7e-6
# Up to this many bytes a rank MPI's allreduce ran recursive doubling there: carried round by round, the 32 KiB calls of
# those rounds came within 10% of their median on 8 ranks, where a ring's bytes had them a third too fast; at 128 KiB
# neither held (a ring's bytes a fifth too fast, doubling's a fifth too slow: docs/validation.md). One library's switch,
# Open MPI 4.1's on one node; MPICH's default is 2 KiB (MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE); 2 ranks show neither.
MPI_DOUBLING_BYTES = 64 << 10


@dataclass(frozen=True)
class Link:
    """One level's links: ``latency_s`` per ring step, ``base_s`` once a call, and ``busbw_Bps``, the bus bandwidth
    a ring reaches over them; ``curve``, where measured: the allreduce (bytes per rank, seconds) on ``curve_ranks``
    ranks, ``curve_per_node`` a node, the fit came from; ``gather_curve`` the allgather there, ``p2p_curve`` a ring
    shift (each rank's sendrecv with its neighbours)."""

    latency_s: float
    busbw_Bps: float
    source: str
    misfit: float = 0.0  # the two terms' largest relative miss from 1 MiB on, before the curve (0: a preset)
    curve: tuple = ()
    curve_ranks: int = 0
    curve_per_node: int = 0
    gather_curve: tuple = ()  # the allgather (bytes per rank, seconds) on the same ranks, where measured
    p2p_curve: tuple = ()  # a ring shift (bytes a rank sends, seconds) on the same ranks, where measured
    base_s: float = 0.0  # a call's latency beside its steps' (a preset: NCCL's; measured: what its steps leave)
    library: str = "nccl"  # whose collectives run over the link: "nccl" (a ring's steps) or "mpi" (``mpi_steps``)

    def to_dict(self) -> dict:
        return asdict(self)


def inter_steps(op: str, nodes: int) -> int:
    """The ring steps that cross a node boundary (NCCL's nInterSteps)."""
    if nodes <= 1:
        return 0
    if op == "allreduce":
        return 2 * (nodes - 1)
    if op in ("allgather", "gather", "reduce_scatter"):
        return nodes - 1
    if op == "bcast":
        return math.ceil(math.log2(nodes))
    return 1  # sendrecv: a neighbour's halo crosses one boundary


def mpi_steps(op: str, ranks: int) -> int:
    """The rounds of MPI's algorithm for a small ``op`` over ``ranks`` ranks (MPICH's choices, Open MPI's alike): an
    allreduce's recursive doubling, with two more rounds where the ranks are no power of two (the ranks beyond it
    fold in first and are sent the result last); the others' ceil(log2(ranks)); a ring shift's one."""
    if ranks <= 1:
        return 0
    if op == "sendrecv":
        return 1
    if op == "allreduce" and ranks & (ranks - 1):
        return int(math.log2(ranks)) + 2
    return math.ceil(math.log2(ranks))


def latency_steps(op: str, ranks: int, nbytes: float, library: str = "nccl") -> tuple[float, float]:
    """(latency steps, bytes over the busiest link) of ``op`` with ``nbytes`` per rank over a link of ``library``:
    ``model_terms``' ring, or MPI's rounds (``mpi_steps``) and bytes (``mpi_volume``)."""
    steps, volume = model_terms(op, ranks, round(nbytes))  # a size through exp(log(8)) is 7.999...: 8 bytes, not 7
    if library != "mpi":
        return steps, volume
    rounds = mpi_steps(op, ranks)
    return float(rounds), mpi_volume(op, rounds, round(nbytes), volume)


def mpi_volume(op: str, rounds: int, nbytes: int, ring_volume: float) -> float:
    """The bytes over the busiest link of MPI's ``op``: an allreduce below MPI_DOUBLING_BYTES a rank, recursive
    doubling's whole message each round; else a ring's (Rabenseifner's, the others')."""
    return float(nbytes * rounds) if op == "allreduce" and nbytes < MPI_DOUBLING_BYTES else ring_volume


def collective_seconds(
    op: str, nbytes: float, ranks: int, per_node: int, intra: Link | None, inter: Link | None
) -> float:
    """Seconds of ``op`` with ``nbytes`` per rank over ``ranks`` ranks, ``per_node`` of them a node: the ring and
    tree terms, scaled by the measured curve of the level it runs over."""
    if ranks <= 1:
        return 0.0
    nodes = -(-ranks // min(per_node, ranks))
    level = inter if nodes > 1 else (intra or inter)
    if nodes == 1 and op == "allreduce" and _doubles(level, nbytes):
        return _doubling_seconds(level, nbytes, ranks)
    modelled = _terms(op, nbytes, ranks, per_node, intra, inter)
    volume = latency_steps(op, ranks, nbytes, level.library if level else "nccl")[1]
    return modelled * _measured_ratio(level, op, volume, intra, inter, nbytes)


def _doubles(level: Link | None, nbytes: float) -> bool:
    """Whether an allreduce of ``nbytes`` a rank over ``level`` is MPI's recursive doubling held to a curve measured
    inside a node."""
    return (
        level is not None
        and level.library == "mpi"
        and bool(level.curve)
        and level.curve_per_node == level.curve_ranks
        and nbytes < MPI_DOUBLING_BYTES
    )


def _doubling_seconds(level: Link, nbytes: float, ranks: int) -> float:
    """MPI's recursive doubling over ``ranks`` ranks of a node: the call's base once, then a round per doubling, each
    what a round of the measured curve took at the same bytes (every round passes the whole message to a partner and
    reduces it, as the 2-rank call's one round does): a round's own costs (a message's protocol, its reduction) carry
    round by round, not as a share of the call."""
    measured = _curve_at(level.curve, nbytes)
    per_round = max(measured - level.base_s, 0.0) / mpi_steps("allreduce", level.curve_ranks)
    return level.base_s + mpi_steps("allreduce", ranks) * per_round


def _curve_at(curve: tuple, nbytes: float) -> float:
    """A measured curve's seconds at ``nbytes`` a rank, interpolated on logarithms, held at its ends."""
    sizes = np.log([b for b, _ in curve])
    seconds = np.log([t for _, t in curve])
    return math.exp(float(np.interp(np.clip(math.log(nbytes), sizes[0], sizes[-1]), sizes, seconds)))


def _terms(op: str, nbytes: float, ranks: int, per_node: int, intra: Link | None, inter: Link | None) -> float:
    g = min(per_node, ranks)
    nodes = -(-ranks // g)
    if nodes == 1:
        link = intra or inter
        steps, volume = latency_steps(op, ranks, nbytes, link.library)
        return link.base_s + steps * link.latency_s + volume / link.busbw_Bps
    if inter is None:
        raise ValueError("a machine of several nodes needs its links between nodes")
    mpi = inter.library == "mpi"
    steps, volume = latency_steps(op, ranks, nbytes, inter.library)
    # MPI's rounds pair ranks ever further apart: the last log2(nodes) of them cross between nodes
    crossing = min(mpi_steps(op, nodes) if mpi else inter_steps(op, nodes), steps)
    within = intra if (intra is not None and g > 1) else inter
    bandwidth = min(inter.busbw_Bps, within.busbw_Bps)
    # a call across nodes pays the base measured (or preset) between them
    ring = inter.base_s + (steps - crossing) * within.latency_s + crossing * inter.latency_s + volume / bandwidth
    if op != "allreduce" or mpi:
        return ring
    tree_latency = 2 * ((g - 1) * within.latency_s + math.ceil(math.log2(nodes)) * inter.latency_s)
    tree = inter.base_s + tree_latency + 2 * nbytes / (TREE_BANDWIDTH * bandwidth)
    return min(ring, tree)


def _measured_ratio(
    level: Link | None, op: str, volume: float, intra: Link | None, inter: Link | None, nbytes: float
) -> float:
    """Measured over modelled time of the collective that puts ``volume`` bytes over each link (``nbytes`` a rank) on
    the ranks the level was measured on (1 for a preset): the protocols' share the two terms miss at that size. A
    gather is held to the measured allgather where there is one, a sendrecv to the ring shift (none: its two terms),
    the rest to the allreduce. MPI's curve inside a node is read at the call's own bytes a rank (the module's
    docstring says why)."""
    if level is None or volume <= 0:
        return 1.0
    like, curve = _curve_for(level, op)
    if not curve:
        return 1.0
    r = level.curve_ranks
    per_rank = {"allreduce": volume * r / (2 * (r - 1)), "allgather": volume / (r - 1), "sendrecv": volume}[like]
    if level.library == "mpi" and level.curve_per_node == r:
        per_rank = nbytes
    elif like == "allreduce" and level.library == "mpi" and volume / mpi_steps(like, r) < MPI_DOUBLING_BYTES:
        per_rank = volume / mpi_steps(like, r)  # recursive doubling's: a whole message each round
    at = min(max(per_rank, curve[0][0]), curve[-1][0])
    return _curve_at(curve, at) / _terms(like, at, r, level.curve_per_node, intra, inter)


def _curve_for(level: Link, op: str) -> tuple[str, tuple]:
    """The measured curve ``op`` is held to on ``level``, and the op it measured."""
    if op == "sendrecv":
        return "sendrecv", level.p2p_curve
    if op in GATHERS and level.gather_curve:
        return "allgather", level.gather_curve
    return "allreduce", level.curve


def _rows(rows: list[dict], op: str, ranks: int, library: str) -> list[tuple[float, float, float, int]]:
    """(steps, volume, seconds, bytes) of each measured size, smallest first."""
    out = [(*latency_steps(op, ranks, r["bytes"], library), float(r["seconds"]), int(r["bytes"])) for r in rows]
    return sorted(out, key=lambda x: x[3])


def _misfit(predict, rows) -> float:
    """The largest relative miss of ``predict(bytes)`` from 1 MiB on (every size where none is that large)."""
    big = [r for r in rows if r[3] >= 1 << 20] or rows
    return float(max(abs(predict(r[3]) - r[2]) / r[2] for r in big))


def fit_link(
    rows: list[dict],
    ranks: int,
    source: str,
    op: str = "allreduce",
    gathers: list | None = None,
    shifts: list | None = None,
    library: str = "nccl",
) -> Link:
    """A level's link from ``spmd bench comm`` rows measured on ``ranks`` ranks of one node (or one per node): the
    latency of the small messages (the least of the smallest few: the first size can hold a warm-up), each ring step
    NCCL's for the kind of link and the base the rest; the bus bandwidth of the largest beyond that latency (the two
    ends of nccl-tests' table); the curve for the sizes between."""
    pts = _rows(rows, op, ranks, library)
    t_small = min(p[2] for p in pts[:SMALL_SIZES])
    steps, volume, t_large, _ = pts[-1]
    transfer = t_large - t_small
    busbw = volume / (transfer if transfer > 0.5 * t_large else t_large)
    if library == "mpi":
        step = MPI_STEP_LATENCY_S
    else:
        step = STEP_LATENCY_S["nvlink" if busbw > NVLINK_CLASS_BPS else "pci"]
    base = max(t_small - steps * step, 0.0)
    link = Link(step, busbw, source, base_s=base, library=library)
    misfit = _misfit(lambda b: _terms(op, b, ranks, ranks, link, None), pts)
    curve = tuple((p[3], p[2]) for p in pts)
    return Link(step, busbw, source, misfit, curve, ranks, ranks, _curve(gathers), _curve(shifts), base, library)


def fit_inter(
    rows: list[dict],
    ranks: int,
    per_node: int,
    intra: Link | None,
    source: str,
    gathers: list | None = None,
    shifts: list | None = None,
    library: str = "nccl",
) -> Link:
    """The links between nodes from an allreduce measured over every rank of several nodes, given the links
    inside them: each crossing step NCCL's network latency, the base what the smallest message's time leaves
    beyond its steps, and the largest message's bus bandwidth beyond that latency."""
    pts = _rows(rows, "allreduce", ranks, library)
    nodes = -(-ranks // per_node)
    steps = pts[0][0]
    crossing = min(mpi_steps("allreduce", nodes) if library == "mpi" else inter_steps("allreduce", nodes), steps)
    t_small = min(p[2] for p in pts[:SMALL_SIZES])
    inside = (steps - crossing) * intra.latency_s if intra is not None and per_node > 1 else 0.0
    step = STEP_LATENCY_S["net"]
    base = max(t_small - inside - crossing * step, 0.0)
    _, volume, t_large, _ = pts[-1]
    transfer = t_large - t_small
    busbw = volume / (transfer if transfer > 0.5 * t_large else t_large)
    link = Link(step, busbw, source, base_s=base, library=library)
    misfit = _misfit(lambda b: _terms("allreduce", b, ranks, per_node, intra, link), pts)
    curve = tuple((p[3], p[2]) for p in pts)
    return Link(step, busbw, source, misfit, curve, ranks, per_node, _curve(gathers), _curve(shifts), base, library)


def _curve(rows: list | None) -> tuple:
    """(bytes per rank, seconds) of measured rows, smallest first."""
    return tuple(sorted((int(r["bytes"]), float(r["seconds"])) for r in rows or ()))

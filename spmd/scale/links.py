"""Collectives on a machine of nodes: the links inside a node and between nodes, and what a collective costs
over them, as NCCL's own tuning model charges it (src/graph/tuning.cc).

A ring over ``g`` ranks on each of ``n`` nodes takes the steps ``measure.collectives`` counts; of them,
``2 (n - 1)`` (allreduce) or ``n - 1`` (allgather, reduce_scatter) cross a node boundary and pay the
network's latency, the rest the node's. Every byte goes round the whole ring, so its bus bandwidth is that of
the slowest link it crosses. NCCL's tree allreduce pays ``2 ((g - 1) intra + log2(n) inter)`` in latency at
0.9 of the bus bandwidth, twice the bytes of a ring's algorithm bandwidth; NCCL takes the faster of the two,
and so does this model. Point-to-point halos between neighbours cross one boundary once nodes are more than one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..measure.collectives import model_terms
from .scaling_model import nonnegative_lstsq

TREE_BANDWIDTH = 0.9  # NCCL's tree allreduce: this share of the bus bandwidth (tuning.cc), its algbw half of it


@dataclass(frozen=True)
class Link:
    """One level's links: ``latency_s`` per step and ``busbw_Bps``, the bus bandwidth a ring reaches over them."""

    latency_s: float
    busbw_Bps: float
    source: str
    misfit: float = 0.0  # the largest relative difference from the sizes it was fitted to (0: a preset)

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


def collective_seconds(
    op: str, nbytes: float, ranks: int, per_node: int, intra: Link | None, inter: Link | None
) -> float:
    """Seconds of ``op`` with ``nbytes`` per rank over ``ranks`` ranks, ``per_node`` of them a node."""
    if ranks <= 1:
        return 0.0
    g = min(per_node, ranks)
    nodes = -(-ranks // g)
    steps, volume = model_terms(op, ranks, int(nbytes))
    if nodes == 1:
        link = intra or inter
        return steps * link.latency_s + volume / link.busbw_Bps
    if inter is None:
        raise ValueError("a machine of several nodes needs its links between nodes")
    crossing = min(inter_steps(op, nodes), steps)
    within = intra if (intra is not None and g > 1) else inter
    bandwidth = min(inter.busbw_Bps, within.busbw_Bps)
    ring = (steps - crossing) * within.latency_s + crossing * inter.latency_s + volume / bandwidth
    if op != "allreduce":
        return ring
    tree_latency = 2 * ((g - 1) * within.latency_s + math.ceil(math.log2(nodes)) * inter.latency_s)
    tree = tree_latency + 2 * nbytes / (TREE_BANDWIDTH * bandwidth)
    return min(ring, tree)


def fit_link(rows: list[dict], ranks: int, source: str, op: str = "allreduce") -> Link:
    """A level's link from ``spmd bench comm`` rows measured on ``ranks`` ranks of one node (or one per node):
    latency and bus bandwidth by non-negative least squares in relative error over every size."""
    steps, volume, seconds = zip(*[(*model_terms(op, ranks, r["bytes"]), r["seconds"]) for r in rows])
    t = np.asarray(seconds, float)
    alpha, beta = nonnegative_lstsq([np.asarray(steps, float), np.asarray(volume, float)], t)
    misfit = float(np.max(np.abs(alpha * np.asarray(steps) + beta * np.asarray(volume) - t) / t))
    return Link(alpha, 1 / beta if beta > 0 else math.inf, source, misfit)


def fit_inter(rows: list[dict], ranks: int, per_node: int, intra: Link | None, source: str) -> Link:
    """The links between nodes from an allreduce measured over every rank of several nodes, given the links
    inside them: what the ring's time holds beyond its steps inside the nodes."""
    nodes = -(-ranks // per_node)
    crossing = inter_steps("allreduce", nodes)
    cols, t, total = [], [], np.asarray([r["seconds"] for r in rows], float)
    for r in rows:
        steps, volume = model_terms("allreduce", ranks, r["bytes"])
        inside = (steps - crossing) * intra.latency_s if intra is not None and per_node > 1 else 0.0
        cols.append((crossing, volume))
        t.append(max(r["seconds"] - inside, 1e-12))
    a, t = np.asarray(cols, float), np.asarray(t)
    alpha, beta = nonnegative_lstsq([a[:, 0], a[:, 1]], t)
    misfit = float(np.max(np.abs(alpha * a[:, 0] + beta * a[:, 1] - t) / total))
    return Link(alpha, 1 / beta if beta > 0 else math.inf, source, misfit)

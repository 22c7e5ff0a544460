"""The host's reads on a target: the read ceiling its links file measured, checked against the sweep's own reads
(``read_ceiling``), carried to a host's ranks (``shared_rate``), and the read phase no faster than it lets them read
(``host_read_ceiling``)."""

from __future__ import annotations

import math

from ..models.phases import sliced_bytes
from ..sweep.analysis import node_counts
from .machines import Machine

# a read ceiling measured within this share of the sweep's own reads went the runs' way (launches differ that much)
SAME_PATH = 0.9


def read_ceiling(scaling: dict, model: dict, machine: Machine, notes: list[str]) -> tuple[dict | None, bool]:
    """(the target host's reads, ``alone_Bps`` a rank alone and ``together_Bps`` its ``readers`` at once, where the
    links file measured reads that can bound this sweep's (``shared_rate`` carries them to a host's ranks); whether
    they were measured by the engine the sweep read by). Where
    the file measured each engine, the sweep's own is taken. A ceiling below what the sweep itself read, a node's
    ranks together or (where the engine is not known to be the sweep's) one rank alone, beyond SAME_PATH, is none:
    that read went another way than the run's reader."""
    read, measured = model["local"].get("read"), machine.host_read
    if read is None or not measured:
        return None, False
    engine = read_engine(scaling)
    matched = engine in (measured.get("engines") or {})
    if matched and engine != measured.get("engine"):
        # the sweep read by another engine than auto chose for the link test's file: that engine's ceiling
        notes.append(f"the host's read ceiling is the one measured with {engine}, the engine the sweep's runs read by")
        measured = {**measured, **measured["engines"][engine], "engine": engine}
    # one rank's rate fitted on a sweep's sizes (two, on one GPU) moves with its launch: it tells another path only
    # where the engine is not known
    own = 0.0 if matched else 1 / read["seconds_per_byte"] if read["seconds_per_byte"] > 0 else math.inf
    together = max((node_read_rate(run) for run in scaling["runs"]), default=0.0)
    if measured["alone_Bps"] < SAME_PATH * own or measured["together_Bps"] < SAME_PATH * together:
        notes.append(
            f"host reads measured at {measured['alone_Bps'] / 1e9:.1f} GB/s a rank alone and "
            f"{measured['together_Bps'] / 1e9:.1f} GB/s a host's ranks together, below the sweep's own "
            f"{own / 1e9:.1f} and {together / 1e9:.1f} GB/s: not the runs' read path, no read ceiling applied"
        )
        return None, False
    return measured, matched


# engines whose readers use what is a rank's own as ranks are added (its GPU's copies of mapped pages, h5py's one
# thread), not the node's CPUs, which direct and KvikIO split among a node's ranks (io.threads: auto)
OWN_READERS = ("mapped", "h5py")


def shared_rate(host_reads: dict, ranks: int) -> float:
    """The bytes/s ``ranks`` ranks of a host read at once, from its reads measured by ``readers`` at once
    (``together_Bps``) and one alone (``alone_Bps``) with ``engine``: as measured where the ranks are no more than its
    readers, or where the engine's readers split the node's CPUs (more ranks, the same CPUs: the measured readers
    already read with all of them), or the engine is not known. Beyond them, by an engine whose readers are each
    rank's own (OWN_READERS), each further reader slows the rest by the contention the measurement showed between one
    reader and its readers (linear contention, the scalability law's first term), so that readers which did not
    saturate a host do not stand for its whole (docs/validation.md, the seventh round); from one reader, its rate is
    the host's whole."""
    readers = host_reads.get("readers") or 1
    together = host_reads["together_Bps"]
    if ranks <= readers or readers < 2 or host_reads.get("engine") not in OWN_READERS:
        return together
    alone = host_reads["alone_Bps"]
    contention = min(1.0, max(0.0, (readers * alone / together - 1) / (readers - 1)))
    return ranks * alone / (1 + (ranks - 1) * contention)


def read_engine(scaling: dict) -> str | None:
    """The engine every piece of every run of a sweep was read by (report.json ``io``), or None: several, or none
    told."""
    used = {
        piece.get("engine")
        for run in scaling["runs"]
        for pieces in ((run["report"].get("io") or {}).get("per_rank") or [])
        for piece in pieces
    }
    return used.pop() if len(used) == 1 else None


def node_readers(run: dict) -> int:
    """The ranks that read beside each other on a sweep's run's busiest node (0 where it read nothing)."""
    report = run["report"]
    if ((report["timings"].get("read") or {}).get("median") or 0.0) <= 0:
        return 0
    return node_counts(run.get("placement") or {}, report.get("device", "cpu"))["node_ranks"] or run["ranks"]


def node_read_rate(run: dict) -> float:
    """Bytes per second the busiest node of a sweep's run read, its ranks together (0 where it read nothing)."""
    readers = node_readers(run)
    if not readers:
        return 0.0
    report = run["report"]
    problem = report["problem"]
    return readers * (problem["bytes"] / run["ranks"] + sliced_bytes(problem)) / report["timings"]["read"]["median"]


def host_read_ceiling(
    model: dict, phases: dict, reads: float, ceiling: float | None, host_ranks: int, readers: int, whole: bool = False
) -> dict:
    """The read phase no faster than the host's shared ``ceiling`` lets its ``host_ranks`` ranks read ``reads``
    bytes each at once: one or two ranks of a sweep are below it, more ranks of a host share its memory. Where
    the target puts no more ranks on a host than the sweep's runs read beside each other on one (``readers``),
    their own reads measured that sharing: the ceiling, another measurement of it, bounds nothing (on 2 H200s it
    charged a 2-rank read 10.3-11.4 ms where the runs read 9.9-10.1). A ceiling measured by the engine the sweep
    read with (``whole``) holds that engine's fixed cost in its rate: the sweep's intercept is not added to it."""
    if ceiling is None or "read" not in phases or host_ranks <= readers:
        return phases
    floor = (0.0 if whole else model["local"]["read"]["intercept_s"]) + host_ranks * reads / ceiling
    if floor <= phases["read"]:
        return phases
    out = {**phases, "read": floor}
    out["total"] = phases["total"] + floor - phases["read"]
    return out

"""The machine a prediction is for: GPUs (or ranks) per node, node counts, and the links inside and between
nodes, measured there (``spmd bench comm --links``) or named by a preset (docs/scaling.md: figures, sources).

A target is a YAML file or an inline ``key=value,key=value`` list with the keys of TARGET_KEYS; anything else,
a wrong type or an impossible value is a ConfigError (exit 2) naming the key.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import ConfigError, brief, one_line
from ...core.safe_yaml import parse_yaml, read_config_text
from ..models.links import BASE_LATENCY_S, Link, fit_inter, fit_link

NCCL_TUNING = "NCCL's tuning model (src/graph/tuning.cc): ring step and base latency of its LL protocol"
# NVLink's line rate less NCCL's protocol overhead on it (about a fifth: docs/scaling.md, the presets' sources), where
# no ring figure of that link was published
NVLINK_OVERHEAD = "80% of line rate, NCCL's NVLink protocol overhead (NVIDIA/nccl-tests#212, NVIDIA/nccl#412)"
# name -> (GB/s of a link per direction as NCCL's ring reaches it, the line rate, latency per ring step in us, where the
# achievable figure comes from, where the line rate does): a prediction prices the achievable figure
INTRA_PRESETS = {
    "nvlink3": (
        240.0,
        300.0,
        0.47,
        NVLINK_OVERHEAD,
        "A100 SXM: 12 NVLink3 links x 25 GB/s each way (NVIDIA datasheet)",
    ),
    "nvlink4": (
        370.0,
        450.0,
        0.47,
        "NCCL's effective NVLink4 bus bandwidth with NCCL_ALGO=RING (NCCL's maintainer, NVIDIA/nccl-tests#212)",
        "H100/H200 SXM: 18 NVLink4 links x 25 GB/s each way (NVIDIA H100 datasheet)",
    ),
    "nvlink5": (720.0, 900.0, 0.47, NVLINK_OVERHEAD, "B200: 18 NVLink5 links x 50 GB/s each way (NVIDIA datasheet)"),
    "pcie4": (
        24.0,
        31.5,
        1.0,
        "NCCL's own figure for a Gen4 x16 link in its topology search (PCI[24.0] in its NCCL_DEBUG=INFO log); "
        "4 RTX 4090 reached 25.7-26.0 allreduce bus bandwidth (tinygrad/open-gpu-kernel-modules#36)",
        "PCIe Gen4 x16: 16 GT/s x 16 lanes, 128b/130b, each way (PCI-SIG)",
    ),
    "pcie5": (
        35.0,
        63.0,
        1.0,
        "4 RTX 5090 on PCIe Gen5 reached 35 allreduce bus bandwidth, 8 of them 28 (NVIDIA/nccl#1639; the host's CPU "
        "and memory bound it, says NCCL's maintainer there)",
        "PCIe Gen5 x16: 32 GT/s x 16 lanes, 128b/130b, each way (PCI-SIG)",
    ),
}
INTER_PRESETS = {  # per NIC; ``nics`` per node multiply the bandwidth
    "ib-hdr": (
        24.0,
        25.0,
        2.7,
        "24 GB/s inter-node bus bandwidth a 200 Gb/s HDR NIC (NCCL's maintainer, NVIDIA/nccl#412)",
        "InfiniBand HDR: 200 Gb/s per port (IBTA)",
    ),
    "ib-ndr": (
        41.0,
        50.0,
        2.7,
        "331 GB/s allreduce bus bandwidth over 8 NDR NICs a node, 4 nodes of 8 H100 (Voltage Park and AI @ Georgia "
        "Tech, github.com/aigatech/vpbenchmarking)",
        "InfiniBand NDR: 400 Gb/s per port (IBTA)",
    ),
    "eth-100g": (
        12.0,
        12.5,
        2.7,
        "12.2 GB/s for a 100 Gb/s NIC, 'as good as you can get' (NCCL's maintainer, NVIDIA/nccl-tests#29)",
        "100 Gb Ethernet (IEEE 802.3)",
    ),
    "eth-200g": (
        24.0,
        25.0,
        2.7,
        "InfiniBand HDR's at the same rate (NVIDIA/nccl#412): RoCE reaches at most what InfiniBand does",
        "200 Gb Ethernet (IEEE 802.3)",
    ),
    "eth-400g": (
        41.0,
        50.0,
        2.7,
        "InfiniBand NDR's at the same rate (github.com/aigatech/vpbenchmarking); RoCE may reach less (27 GB/s a "
        "400 Gb/s rail in NVIDIA/nccl#2409)",
        "400 Gb Ethernet (IEEE 802.3)",
    ),
}
# the presets a held-out measurement has met, and on what (docs/validation.md#held-out-cases: the figures)
HELD_OUT_PRESETS = {"nvlink4": "2 H200s"}
TARGET_KEYS = {
    "name": "what the target is called in the report (default: built from the other keys)",
    "gpus_per_node": "ranks on each node: its GPUs (on CPUs, the ranks a node runs)",
    "nodes": "a node count or a list of them",
    "links": "a file `spmd bench comm --links --json FILE` wrote on the target: both levels as measured there",
    "intra": "a preset for the links inside a node, or {busbw_GBps, latency_us}",
    "inter": "a preset for the links between nodes (per NIC), or {busbw_GBps, latency_us}",
    "nics": "NICs per node that the inter preset's bandwidth is multiplied by (default 1)",
    "host_read": "a file `spmd bench comm --host-read --json FILE` (or `--links`) wrote: the host's shared reads "
    "measured there, for a target whose links are presets (its ranks may share a GPU: a one-GPU machine measures "
    "as many readers as the target puts on a host)",
    "host_ranks": "ranks sharing one host's memory and reads (default gpus_per_node; more where several of the "
    "nodes NCCL sees are one host: containers, VMs, emulated nodes)",
}
MAX_NODES = 1 << 16


@dataclass
class Machine:
    """A target: ``gpus_per_node`` ranks on each of ``nodes`` nodes (a list of counts), over ``intra`` / ``inter``."""

    name: str
    gpus_per_node: int
    nodes: list[int]
    intra: Link | None
    inter: Link | None
    backend: str | None = None  # the communicator the links were measured over (None: a preset)
    notes: list[str] = field(default_factory=list)
    host_read: dict | None = None  # the host's shared read ceiling (measure.io.host_read), where measured
    host_read_source: str | None = None  # where it was measured, in words (input_words names it)
    host_ranks: int | None = None  # ranks sharing a host's memory where more than a node's (None: a node's)
    node_cores: dict | None = None  # on CPUs, what the node's ranks at once cost each other (measure.cores)

    def ranks_on_a_host(self, ranks: int) -> int:
        """Of ``ranks`` ranks, those that share the busiest host's memory (its reads, its copies in)."""
        return min(ranks, self.host_ranks or self.gpus_per_node)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "gpus_per_node": self.gpus_per_node,
            "nodes": self.nodes,
            "intra": self.intra.to_dict() if self.intra else None,
            "inter": self.inter.to_dict() if self.inter else None,
            "backend": self.backend,
            "host_read": self.host_read,
            "host_read_source": self.host_read_source,
            "host_ranks": self.host_ranks,
            "node_cores": self.node_cores,
        }


def read_target(spec: str) -> Machine:
    """A Machine from a YAML file's path or an inline ``key=value,...`` list."""
    if "=" in spec and not Path(spec).exists():
        raw: dict = {}
        for item in re.split(r",(?=\s*\w+=)", spec):  # a comma inside a value (nodes=[1,2]) stays
            key, eq, value = item.partition("=")
            if not eq:
                raise ConfigError(f"target {one_line(spec)!s}: expected key=value, got {brief(item)}")
            raw[key.strip()] = parse_yaml(value, f"target key {key.strip()}")
        where = "target"
    else:
        raw = parse_yaml(read_config_text(spec), f"target {spec}")
        where = f"target {one_line(spec)}"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a mapping of keys ({', '.join(TARGET_KEYS)})")
    return machine_from_dict(raw, where, base=Path(spec).parent if "=" not in spec else Path("."))


def machine_from_dict(raw: dict, where: str = "target", base: Path = Path(".")) -> Machine:
    unknown = [k for k in raw if k not in TARGET_KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {brief(unknown[0])} (known: {', '.join(TARGET_KEYS)})")
    nodes = raw.get("nodes", 1)
    nodes = nodes if isinstance(nodes, list) else [nodes]
    if not nodes or not all(_count(n) and n <= MAX_NODES for n in nodes):
        raise ConfigError(f"{where}: key nodes: whole numbers from 1 to {MAX_NODES}, got {brief(raw.get('nodes'))}")
    intra = inter = host_read = node_cores = None
    backend = None
    notes = []
    if "links" in raw:
        if not isinstance(raw["links"], str):
            raise ConfigError(f"{where}: key links: a file name, got {brief(raw['links'])}")
        measured = read_links(base / raw["links"])  # an absolute path stays itself
        intra, inter, backend = measured["intra"], measured["inter"], measured["backend"]
        host_read, node_cores = measured["host_read"], measured["node_cores"]
        per_node = measured["gpus_per_node"]
        notes.append(f"links measured by spmd bench comm over {backend} on {measured['ranks']} rank(s)")
    else:
        per_node = None
    host_read_source = f"spmd bench comm --links on {measured['ranks']} rank(s)" if host_read else None
    if "host_read" in raw:
        if "links" in raw:
            raise ConfigError(
                f"{where}: key host_read: the links file holds the host's reads already: give one of them"
            )
        if not isinstance(raw["host_read"], str):
            raise ConfigError(f"{where}: key host_read: a file name, got {brief(raw['host_read'])}")
        host_read, host_read_source = read_host_read(base / raw["host_read"])
        notes.append(
            f"the host's reads measured by {host_read_source}: the target's hosts are taken to read as that one does"
        )
    per_node = raw.get("gpus_per_node", per_node)
    if not _count(per_node) or per_node > MAX_NODES:
        raise ConfigError(f"{where}: key gpus_per_node: a whole number from 1, got {brief(raw.get('gpus_per_node'))}")
    host_ranks = raw.get("host_ranks")
    if host_ranks is not None and (not _count(host_ranks) or not per_node <= host_ranks <= MAX_NODES * per_node):
        raise ConfigError(
            f"{where}: key host_ranks: a whole number from gpus_per_node ({per_node}), got {brief(host_ranks)}"
        )
    readers = (host_read or {}).get("readers")
    if readers and readers < (host_ranks or per_node):  # how more readers than measured share a host is inferred
        carried = (
            "their shared rate is the host's whole where the sweep's engine splits the node's CPUs among its ranks "
            "(direct, kvikio), else carried to them by the contention measured between one reader and those"
            if readers > 1
            else "their rate is taken as the host's whole (a host one reader did not saturate reads faster)"
        )
        notes.append(
            f"the host's reads were measured with {readers} rank(s) reading at once and the target puts "
            f"{host_ranks or per_node} on a host: {carried}; measure with {host_ranks or per_node} to know"
        )
    nics = raw.get("nics", 1)
    if not _count(nics) or nics > 64:
        raise ConfigError(f"{where}: key nics: a whole number from 1 to 64, got {brief(nics)}")
    if "intra" in raw:
        intra = _link(raw["intra"], INTRA_PRESETS, 1, where, "intra")
    if "inter" in raw:
        inter = _link(raw["inter"], INTER_PRESETS, nics, where, "inter")
    if per_node > 1 and intra is None:
        raise ConfigError(f"{where}: key intra: {per_node} GPUs a node need their links (a preset or `links`)")
    if max(nodes) > 1 and inter is None:
        raise ConfigError(f"{where}: key inter: {max(nodes)} nodes need the links between them (a preset or `links`)")
    name = raw.get("name")
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"{where}: key name: text, got {brief(name)}")
    if name is None:
        over = [raw.get("intra") if isinstance(raw.get("intra"), str) else None]
        over += [f"{nics}x {raw['inter']}" if isinstance(raw.get("inter"), str) else None]
        label = " + ".join(x for x in over if x) or ("measured links" if "links" in raw else "given links")
        name = label
    return Machine(
        one_line(name)[:120],
        per_node,
        sorted(set(nodes)),
        intra,
        inter,
        backend,
        notes,
        host_read,
        host_read_source,
        host_ranks,
        node_cores,
    )


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _link(value, presets: dict, nics: int, where: str, key: str) -> Link:
    if isinstance(value, str):
        if value not in presets:
            raise ConfigError(f"{where}: key {key}: unknown preset {brief(value)} (one of {', '.join(presets)})")
        gbps, line_gbps, latency_us, achieved, line = presets[value]
        name = f"preset {value}" + (f" x {nics}" if nics > 1 else "")
        source = f"{gbps:g} GB/s as NCCL reaches it ({achieved}) of {line_gbps:g} line rate ({line}); {NCCL_TUNING}"
        return Link(latency_us * 1e-6, gbps * nics * 1e9, f"{name}: {source}", base_s=BASE_LATENCY_S)
    if isinstance(value, dict):
        extra = [k for k in value if k not in ("busbw_GBps", "latency_us")]
        if extra:
            raise ConfigError(f"{where}: key {key}.{brief(extra[0])}: unknown (known: busbw_GBps, latency_us)")
        bw, lat = value.get("busbw_GBps"), value.get("latency_us", 0.0)
        if not _positive(bw) or not (_positive(lat) or lat == 0):
            raise ConfigError(f"{where}: key {key}: busbw_GBps > 0 and latency_us >= 0, got {brief(value)}")
        return Link(float(lat) * 1e-6, float(bw) * 1e9, "given in the target", base_s=BASE_LATENCY_S)
    raise ConfigError(f"{where}: key {key}: a preset name or {{busbw_GBps, latency_us}}, got {brief(value)}")


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def read_links(path: Path) -> dict:
    """{'intra', 'inter' (Links or None), 'gpus_per_node', 'ranks', 'backend', 'host_read', 'node_cores'} from a
    ``spmd bench comm --links`` file."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"target key links: cannot read {one_line(path)}: {one_line(exc)[:200]}") from None
    if not isinstance(data, dict) or data.get("kind") != "links":
        raise ConfigError(f"target key links: {one_line(path)} is not a file `spmd bench comm --links` wrote")
    return links_from_bench(data)


def links_from_bench(data: dict) -> dict:
    """The links a ``--links`` measurement implies: inside a node fitted to its node-local allreduce; between
    nodes to the allreduce over every rank, less its steps inside the nodes."""
    levels, per_node, ranks = data["levels"], data["ranks_per_node"], data["ranks"]
    where = f"{data['backend']} on {data['device']}"
    library = "nccl" if data["backend"] == "nccl" else "mpi"  # mpi and mpi-cuda run MPI's own collectives
    intra = inter = None
    if "intra" in levels:
        level = levels["intra"]
        intra = fit_link(
            level["rows"],
            level["ranks"],
            f"measured inside a node ({where})",
            gathers=level.get("allgather"),
            shifts=level.get("sendrecv"),
            library=library,
        )
    if "world" in levels and data["nodes"] > 1:
        level = levels["world"]
        source = f"measured between nodes ({where})"
        inter = fit_inter(
            level["rows"],
            ranks,
            per_node,
            intra,
            source,
            gathers=level.get("allgather"),
            shifts=level.get("sendrecv"),
            library=library,
        )
    reads = data.get("host_read")
    if reads is not None and not _well_formed_reads(reads):
        raise ConfigError("target key links: its host_read is not what spmd bench comm --links writes")
    cores = data.get("node_cores")
    if cores is not None and not _well_formed_cores(cores):
        raise ConfigError("target key links: its node_cores is not what spmd bench comm --links writes")
    return {
        "intra": intra,
        "inter": inter,
        "gpus_per_node": per_node,
        "ranks": ranks,
        "backend": data["backend"],
        "host_read": reads,
        "node_cores": cores,
    }


def _well_formed_cores(cores) -> bool:
    """Whether ``cores`` is a ``node_cores`` as spmd bench comm writes it: ranks at once (at least 2), and a slowdown
    within its least and most slowed kernel's."""
    return (
        isinstance(cores, dict)
        and _count(cores.get("ranks"))
        and cores["ranks"] >= 2
        and all(_positive(cores.get(k)) for k in ("slowdown", "low", "high"))
        and cores["low"] <= cores["slowdown"] <= cores["high"]
    )


def _well_formed_reads(reads) -> bool:
    """Whether ``reads`` is a ``host_read`` as spmd bench comm writes it (``engines`` in files of a newer spmd)."""
    engines = reads.get("engines", {}) if isinstance(reads, dict) else {}
    return (
        isinstance(reads, dict)
        and all(_positive(reads.get(k)) for k in ("bytes", "readers", "together_Bps"))
        and isinstance(engines, dict)
        and all(
            isinstance(r, dict) and all(_positive(r.get(k)) for k in ("alone_Bps", "together_Bps"))
            for r in engines.values()
        )
    )


def read_host_read(path: Path) -> tuple[dict, str]:
    """(the host's reads, where they were measured in words) from a file ``spmd bench comm --host-read`` or
    ``--links`` wrote."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"target key host_read: cannot read {one_line(path)}: {one_line(exc)[:200]}") from None
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind not in ("host_read", "links") or not _well_formed_reads(data.get("host_read")):
        raise ConfigError(
            f"target key host_read: {one_line(path)} holds no host reads that spmd bench comm --host-read (or "
            "--links with --read-bytes) wrote"
        )
    reads = data["host_read"]
    if kind == "links":
        return reads, f"spmd bench comm --links on {data.get('ranks')} rank(s)"
    gpus = data.get("gpus") or 0
    on = f" over {gpus} GPU(s) a host" + (" shared by its ranks" if data.get("shared_gpu") else "") if gpus else ""
    return reads, f"spmd bench comm --host-read, {reads['readers']} rank(s) reading at once{on}"


def preset_validation(machine: Machine) -> list[str]:
    """A note per preset the target uses: where a held-out measurement met it, or that none has."""
    presets = [link for link in (machine.intra, machine.inter) if link and link.source.startswith("preset ")]
    out = []
    for name in dict.fromkeys(link.source.split()[1].rstrip(":") for link in presets):
        if name in HELD_OUT_PRESETS:
            out.append(
                f"preset {name} met a held-out measurement on {HELD_OUT_PRESETS[name]} (docs/validation.md), where "
                "fewer measured times fell inside their intervals than the intervals claim; measured links (spmd "
                "bench comm --links on the target) are the prediction to trust"
            )
        else:
            out.append(
                f"preset {name} is unvalidated: no held-out measurement has met it (no lent machine has it, "
                "docs/validation.md); measured links (spmd bench comm --links on the target) are the prediction to "
                "trust"
            )
    return out

"""Where the ranks of a communicator run, and what links them.

The link between two GPUs of one node comes from NVML (nvidia-ml-py, optional): NVLink
when NVML reports NVLink peer-to-peer between them, else the PCIe level of their common
ancestor (one switch, a host bridge, across CPU sockets). NVML sees every GPU of the node
whatever CUDA_VISIBLE_DEVICES says, so each node's first rank can judge all its pairs.
"""

from __future__ import annotations

import functools
import os

from . import xp as xpmod
from .cpus import bound_cpus, node_cpus

# Link classes, best to worst; a group of ranks is as good as its worst pair.
LINK_CLASSES = {
    "single": "one rank",
    "cpu-shm": "same node, CPU shared memory",
    "nvlink": "same node, NVLink",
    "pcie": "same node, PCIe",
    "unknown": "same node, GPU link unknown",
    "same-gpu": "ranks sharing one GPU",
    "network": "across nodes",
}
MAX_LISTED_PAIRS = 120
# NCCL settings that take a same-node GPU link out of NCCL's hands (as behind a PCIe host bridge, or across nodes)
NCCL_PATH_VARS = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_P2P_LEVEL")

# NVML_TOPOLOGY_* levels of the common PCIe ancestor of two GPUs.
PCIE_LEVELS = {
    0: "PCIe, same board",
    10: "PCIe, through one switch",
    20: "PCIe, through several switches",
    30: "PCIe, through the CPU's host bridge",
    40: "PCIe, across host bridges of one CPU",
    50: "PCIe + CPU socket interconnect (across NUMA nodes)",
}


@functools.lru_cache(maxsize=1)
def nvml():
    """The initialized ``pynvml`` module, or None (not installed, no driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # ImportError, or NVMLError when there is no driver
        return None


def normalize_bus_id(bus_id: str) -> str:
    """'00000000:1B:00.0' (NVML) and '0000:1b:00.0' (CUDA) -> '0000:1b:00.0'."""
    domain, bus, rest = bus_id.strip().lower().split(":")
    device, _, function = rest.partition(".")
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{int(function or '0', 16)}"


def gpu_pair_link(bus_a: str, bus_b: str, lib=None) -> tuple[str, str]:
    """(link class, detail) between the GPUs at PCI bus ids ``bus_a`` and ``bus_b`` of this node."""
    if normalize_bus_id(bus_a) == normalize_bus_id(bus_b):
        return "same-gpu", "one GPU serves both ranks"
    lib = lib if lib is not None else nvml()
    if lib is None:
        return "unknown", "install nvidia-ml-py (spmd[cuda13]) to identify the link"
    try:
        a = lib.nvmlDeviceGetHandleByPciBusId(normalize_bus_id(bus_a).encode())
        b = lib.nvmlDeviceGetHandleByPciBusId(normalize_bus_id(bus_b).encode())
        if lib.nvmlDeviceGetP2PStatus(a, b, lib.NVML_P2P_CAPS_INDEX_NVLINK) == lib.NVML_P2P_STATUS_OK:
            return "nvlink", f"NVLink, {active_nvlinks(a, lib)} links per GPU"
        level = lib.nvmlDeviceGetTopologyCommonAncestor(a, b)
        return "pcie", PCIE_LEVELS.get(level, f"PCIe (NVML topology level {level})")
    except lib.NVMLError as exc:
        return "unknown", f"NVML: {exc}"


def active_nvlinks(handle, lib) -> int:
    """Number of active NVLink links of one GPU."""
    count = 0
    for link in range(lib.NVML_NVLINK_MAX_LINKS):
        try:
            count += lib.nvmlDeviceGetNvLinkState(handle, link) == lib.NVML_FEATURE_ENABLED
        except lib.NVMLError:  # links this GPU does not have
            continue
    return count


def describe_placement(ctx) -> dict | None:
    """Hosts, ranks per node, device per rank and the links between ranks of ``ctx.comm``.

    Collective over ``ctx`` (after device binding). Returns the description on rank 0,
    None elsewhere.
    """
    bus_id = xpmod.device_pci_bus_id(ctx.device_id) if ctx.device == "gpu" else None
    # the CPUs this node's ranks may run on (their affinity, which a launcher or SLURM may narrow), not the node's
    bound = bound_cpus()
    ranks_cpus = len(frozenset().union(*ctx.node_comm.allgather(bound)))
    mine = {
        "rank": ctx.rank,
        "host": ctx.host,
        "local_rank": ctx.local_rank,
        "device": ctx.device,
        "device_id": ctx.device_id,
        "name": ctx.device_name,
        "pci_bus_id": bus_id,
        "cpus": ranks_cpus,
        "bound_cpus": len(bound),  # this rank's own binding
        "node_cpus": len(node_cpus()),  # what the job may use on the node (its cpuset)
        "gpus": xpmod.gpu_count() if ctx.device == "gpu" else 0,
        "nccl_env": {k: os.environ[k] for k in NCCL_PATH_VARS if k in os.environ},
    }
    everyone = ctx.comm.allgather(mine)
    pairs = node_pairs(everyone, ctx.host) if ctx.local_rank == 0 else []
    gathered = ctx.comm.gather(pairs, root=0)
    if ctx.rank != 0:
        return None
    return summarize_placement(everyone, [p for part in gathered for p in part])


def node_pairs(ranks: list[dict], host: str) -> list[dict]:
    """The link of every pair of ranks on ``host``."""
    local = [r for r in ranks if r["host"] == host]
    pairs = []
    for i, a in enumerate(local):
        for b in local[i + 1 :]:
            if a["device"] == "gpu":
                cls, detail = gpu_pair_link(a["pci_bus_id"], b["pci_bus_id"])
            else:
                cls, detail = "cpu-shm", "MPI shared memory"
            pairs.append({"ranks": [a["rank"], b["rank"]], "class": cls, "detail": detail})
    return pairs


def summarize_placement(ranks: list[dict], pairs: list[dict]) -> dict:
    """Placement of a group: per-host ranks, per-rank device, same-node pairs, worst link,
    and the hosts running more ranks than they have CPUs (their timings measure contention)."""
    hosts: dict[str, list[int]] = {}
    cpus: dict[str, int] = {}
    gpus: dict[str, int] = {}
    for r in ranks:
        hosts.setdefault(r["host"], []).append(r["rank"])
        cpus[r["host"]] = r.get("cpus") or 0
        gpus[r["host"]] = r.get("gpus") or 0
    counts: dict[str, int] = {}
    for p in pairs:
        counts[p["class"]] = counts.get(p["class"], 0) + 1
    n = len(ranks)
    if len(hosts) > 1:
        counts["network"] = n * (n - 1) // 2 - len(pairs)
    worst = max(counts, key=list(LINK_CLASSES).index) if counts else "single"
    details = sorted({p["detail"] for p in pairs if p["class"] == worst})
    path = nccl_path(ranks[0].get("nccl_env") or {}) if worst in ("nvlink", "pcie", "unknown") else None
    return {
        "hosts": hosts,
        "ranks_per_node": {h: len(rs) for h, rs in hosts.items()},
        "cpus_per_node": cpus,
        "single_cpu_gpu_ranks": single_cpu_gpu_ranks(ranks, hosts),
        "gpus_per_node": gpus,
        "oversubscribed": sorted(h for h, rs in hosts.items() if 0 < cpus[h] < len(rs)),
        "ranks": ranks,
        "devices": sorted({r["name"] for r in ranks}),
        "link_class": worst,
        "link": LINK_CLASSES[worst]
        + (f" ({'; '.join(details + ([path] if path else []))})" if details or path else ""),
        "nccl_env": ranks[0].get("nccl_env") or {},
        "pair_counts": counts,
        "pairs": pairs[:MAX_LISTED_PAIRS],
    }


# how to give each rank several CPUs, for the warning and the advice about ranks bound to one
MORE_CPUS = "Open MPI `mpirun --bind-to none` or `--map-by slot:PE=N`, SLURM `--cpus-per-task=N`"


def single_cpu_gpu_ranks(ranks: list[dict], hosts: dict[str, list[int]]) -> list[int]:
    """GPU ranks the launcher bound to one CPU where the job's cpuset gave their node at least two per rank (Open
    MPI's mpirun binds each of 1-2 ranks to one core): the rank's host thread, which launches every kernel, shares
    that CPU with NCCL's proxy thread and spmd's watchdog, so a launch-bound step measures their contention."""
    return [
        r["rank"]
        for r in ranks
        if r.get("device") == "gpu" and r.get("bound_cpus") == 1 and r.get("node_cpus", 0) >= 2 * len(hosts[r["host"]])
    ]


def nccl_path(env: dict) -> str | None:
    """What rank 0's NCCL settings make of a same-node GPU link (the launcher passes them to every rank), or None
    where NCCL may use the link: slow topologies (nodes joined by a network) are reproduced this way."""
    p2p_off = env.get("NCCL_P2P_DISABLE", "0") not in ("", "0")
    shm_off = env.get("NCCL_SHM_DISABLE", "0") not in ("", "0")
    if p2p_off and shm_off:
        return "but NCCL_P2P_DISABLE and NCCL_SHM_DISABLE are set: NCCL uses its network transport (sockets) instead"
    if p2p_off:
        return "but NCCL_P2P_DISABLE is set: NCCL goes through host shared memory instead"
    if env.get("NCCL_P2P_LEVEL"):
        return f"NCCL_P2P_LEVEL={env['NCCL_P2P_LEVEL']} limits where NCCL uses it"
    return None

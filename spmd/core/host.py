"""The host as a fact: the compute threads a rank runs and the load beside it on its node.

A rank's compute threads (PyTorch's intra-op pool, OpenMP, BLAS) are chosen once per rank, alike for every run of a
sweep: the rank's share of its node's CPUs for the most ranks the sweep stands for on that node (its largest run, or a
share of N: one rank standing for a rank of N), so a 1-rank run, an N-rank run and a share compare like with like.
``OMP_NUM_THREADS`` (or ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``), when set, is taken as given. ``HostLoad``
measures, over the timed repeats, the CPU time the rank used and the CPU time of its node's CPUs, so the report can say
what other processes took beside the ranks; on a GPU also how many compute processes NVML lists on the rank's GPU at the
repeats' start and end, so the report can say which GPU ran another process beside the job's (a busy device: its kernels
wait for the other's)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import xp as xpmod
from .cpus import bound_cpus, node_cpus
from .topology import normalize_bus_id, nvml

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
BUSY_SHARE = 0.10  # other processes taking this share of the CPU time the ranks could use: a busy host


@dataclass(frozen=True)
class ThreadChoice:
    """How many compute threads a rank runs, and why (``how``: a sentence's end, e.g. 'OMP_NUM_THREADS=4')."""

    count: int
    how: str


def choose_threads(ranks_on_node: int, cpus: int | None = None, env: dict | None = None) -> ThreadChoice:
    """The compute threads of one rank: the first of THREAD_VARIABLES set to a positive integer, as given; else the
    rank's share of ``cpus`` (default: the CPUs this job may use on the node) among ``ranks_on_node`` ranks."""
    env = os.environ if env is None else env
    for name in THREAD_VARIABLES:
        value = (env.get(name) or "").strip().split(",")[0]  # OpenMP's nested form '4,2': the outer level
        if value.isdigit() and int(value) > 0:
            return ThreadChoice(int(value), f"{name}={value} as given")
    cpus = len(node_cpus()) if cpus is None else cpus
    ranks = max(1, ranks_on_node)
    return ThreadChoice(
        max(1, cpus // ranks), f"the rank's share of {cpus} CPU(s) for {ranks} rank(s) on the node (spmd's default)"
    )


def apply_threads(choice: ThreadChoice) -> None:
    """Limit BLAS and OpenMP pools to ``choice.count`` (threadpoolctl); PyTorch's pool too where it is loaded."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency; absent only where spmd is not installed
        pass
    else:
        threadpool_limits(limits=choice.count)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(choice.count)


def thread_facts() -> dict:
    """The threads the loaded libraries run now: {'blas': n, 'openmp': n, 'torch': n} (a library not loaded is
    absent) and the variables that chose them."""
    out: dict = {}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover
        pools = []
    else:
        pools = threadpool_info()
    for pool in pools:
        api = pool.get("user_api")
        if api in ("blas", "openmp"):
            out[api] = max(out.get(api, 0), int(pool.get("num_threads") or 0))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        out["torch"] = int(torch.get_num_threads())
    out["env"] = {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ}
    return out


def compute_threads(facts: dict) -> int:
    """The most threads one of a rank's compute pools runs (at least 1)."""
    return max([facts.get(k, 0) for k in ("blas", "openmp", "torch")] + [1])


def cpu_seconds(cpus: frozenset[int], stat: Path = Path("/proc/stat")) -> float | None:
    """CPU seconds ``cpus`` spent busy since boot (user, nice, system, irq, softirq, steal: not idle or iowait);
    None where /proc/stat is not readable."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    tick = clock_tick()
    busy = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        fields = [int(v) for v in rest.split()]
        busy += sum(fields[i] for i in (0, 1, 2, 5, 6, 7) if i < len(fields))
    return busy / tick


def machine_id() -> str | None:
    """The running kernel's boot id: the same for every rank of one machine, emulated nodes included."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def clock_tick() -> int:
    """/proc/stat's ticks a second."""
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def gpu_bus_id(device_id: int | None) -> str | None:
    """The PCI bus id of CUDA device ``device_id``; None off a GPU or where CUDA cannot say (a fact, never a
    failure)."""
    if device_id is None:
        return None
    try:
        return xpmod.device_pci_bus_id(device_id)
    except Exception:  # no CuPy in this process, a driver error
        return None


def gpu_processes(bus_id: str | None, lib=None) -> int | None:
    """How many compute processes NVML lists on the GPU at PCI bus id ``bus_id`` (the rank's own among them); None
    where it cannot say (no GPU, no NVML, no driver)."""
    lib = lib if lib is not None else (nvml() if bus_id else None)
    if lib is None or not bus_id:
        return None
    try:
        handle = lib.nvmlDeviceGetHandleByPciBusId(normalize_bus_id(bus_id).encode())
        return len(lib.nvmlDeviceGetComputeRunningProcesses(handle))
    except Exception:  # NVMLError: not supported, no permission
        return None


class HostLoad:
    """The CPU time of this process and of the node's CPUs between ``start`` and ``stop``, and on a GPU (``gpu``: its
    PCI bus id) the compute processes on it at both ends."""

    def __init__(self, gpu: str | None = None, nvml_lib=None):
        self.cpus = node_cpus()
        self.gpu, self._nvml = gpu, nvml_lib
        self._start: tuple[float, float, float | None, int | None] | None = None
        self.sample: dict | None = None

    def start(self) -> None:
        self._start = (time.perf_counter(), time.process_time(), cpu_seconds(self.cpus), self._processes())

    def _processes(self) -> int | None:
        return gpu_processes(self.gpu, self._nvml) if self.gpu else None

    def stop(self) -> dict:
        """{'wall_s', 'own_cpu_s', 'node_busy_s' (None where unknown), 'node_cpus', 'machine'} of the window, and
        on a GPU 'gpu' (its bus id) and 'gpu_processes' (the most NVML listed at either end, None where unknown)."""
        wall0, own0, busy0, procs0 = self._start or (time.perf_counter(), time.process_time(), None, None)
        busy1 = cpu_seconds(self.cpus)
        self.sample = {
            "wall_s": time.perf_counter() - wall0,
            "own_cpu_s": time.process_time() - own0,
            "node_busy_s": busy1 - busy0 if busy0 is not None and busy1 is not None else None,
            "node_cpus": len(self.cpus),
            "machine": machine_id(),
        }
        if self.gpu:
            counts = [c for c in (procs0, self._processes()) if c is not None]
            self.sample.update(gpu=self.gpu, gpu_processes=max(counts) if counts else None)
        return self.sample


def rank_host_facts(threads: ThreadChoice | None, load: dict | None, device: str = "cpu") -> dict:
    """What one rank says of its host: its compute threads (chosen and running), its CPUs and its load sample."""
    facts = thread_facts()
    return {
        "device": device,
        "threads": {
            "chosen": threads.count if threads else None,
            "how": threads.how if threads else "left to the libraries (GPU rank)",
            "running": facts,
            "compute": compute_threads(facts),
        },
        "bound_cpus": len(bound_cpus()),
        "load": load,
    }


def node_load(ranks: list[dict], hosts: list[str]) -> dict[str, dict]:
    """host -> {'ranks', 'threads', 'cpus', 'wall_s', 'ranks_cpu_s', 'others_cpu_s', 'others_share',
    'oversubscribed_threads'} from every rank's ``rank_host_facts``: the other processes' CPU time is the node's
    busy time less its ranks' own, over the CPU time its CPUs had in the window (the longest rank's wall)."""
    out: dict[str, dict] = {}
    for facts, host in zip(ranks, hosts):
        node = out.setdefault(
            host, {"ranks": 0, "threads": 0, "cpus": 0, "wall_s": 0.0, "ranks_cpu_s": 0.0, "busy": []}
        )
        load = facts.get("load") or {}
        node["ranks"] += 1
        # a GPU rank's host pools mostly wait for the device: only CPU ranks' threads count against the cores
        node["threads"] += facts["threads"]["compute"] if facts.get("device", "cpu") == "cpu" else 0
        node["cpus"] = max(node["cpus"], load.get("node_cpus") or 0)
        node["wall_s"] = max(node["wall_s"], load.get("wall_s") or 0.0)
        node["ranks_cpu_s"] += load.get("own_cpu_s") or 0.0
        if load.get("node_busy_s") is not None:
            node["busy"].append(load["node_busy_s"])
    # nodes emulated on one machine (SPMD_HOST, network namespaces) share its /proc/stat: every rank of the machine
    # is its own, not another process
    on_machine: dict[str, float] = {}
    for facts in ranks:
        load = facts.get("load") or {}
        key = load.get("machine") or ""
        on_machine[key] = on_machine.get(key, 0.0) + (load.get("own_cpu_s") or 0.0)
    machine_of = {host: (f.get("load") or {}).get("machine") or "" for f, host in zip(ranks, hosts)}
    for host, node in out.items():
        busy = node.pop("busy")
        capacity = node["wall_s"] * node["cpus"]
        ours = (
            max(node["ranks_cpu_s"], on_machine.get(machine_of[host], 0.0)) if machine_of[host] else node["ranks_cpu_s"]
        )
        # /proc/stat counts whole ticks: each CPU's busy time is known to within one, so the share is its lower end
        others = max(0.0, max(busy) - ours - node["cpus"] / clock_tick()) if busy else None
        node["others_cpu_s"] = others
        node["others_share"] = others / capacity if others is not None and capacity > 0 else None
        # more threads than CPUs; with one a rank it is the ranks that outnumber the CPUs (placement says that)
        node["oversubscribed_threads"] = bool(node["cpus"]) and node["threads"] > max(node["cpus"], node["ranks"])
    return out


def node_gpus(ranks: list[dict], hosts: list[str]) -> dict[str, dict]:
    """host -> {GPU bus id: {'ranks' (the job's ranks on it), 'processes' (the most NVML listed), 'others' (the
    processes beyond the job's ranks)}} of the GPUs whose ranks sampled them; hosts without any left out."""
    out: dict[str, dict] = {}
    for facts, host in zip(ranks, hosts):
        load = facts.get("load") or {}
        if not load.get("gpu") or load.get("gpu_processes") is None:
            continue
        gpu = out.setdefault(host, {}).setdefault(load["gpu"], {"ranks": 0, "processes": 0})
        gpu["ranks"] += 1
        gpu["processes"] = max(gpu["processes"], load["gpu_processes"])
    for gpus in out.values():
        for gpu in gpus.values():
            gpu["others"] = max(0, gpu["processes"] - gpu["ranks"])
    return out


def device_sharing(host: dict | None, hosts: list[str]) -> dict[int, int]:
    """rank -> the other processes on its GPU during the repeats (report.json ``host``), for ranks that had any."""
    per_rank, gpus = (host or {}).get("per_rank") or [], (host or {}).get("gpus") or {}
    out = {}
    for rank, (facts, name) in enumerate(zip(per_rank, hosts)):
        bus = (facts.get("load") or {}).get("gpu")
        others = ((gpus.get(name) or {}).get(bus) or {}).get("others", 0) if bus else 0
        if others:
            out[rank] = others
    return out


def busy_reasons(nodes: dict[str, dict], gpus: dict[str, dict] | None = None) -> list[str]:
    """Short reasons a run measured a busy host: compute threads beyond the node's CPUs, other processes taking
    BUSY_SHARE or more of the CPU time the ranks could use, or a GPU (``gpus``, node_gpus) that ran another process
    beside the job's ranks. Empty when none."""
    out = []
    for host, node in sorted(nodes.items()):
        if node.get("oversubscribed_threads"):
            out.append(
                f"busy host: {host} ran {node['threads']} compute threads over {node['ranks']} rank(s) on "
                f"{node['cpus']} CPU(s)"
            )
        share = node.get("others_share")
        if share is not None and share >= BUSY_SHARE:
            out.append(
                f"busy host: other processes on {host} took {share:.0%} of the CPU time its ranks could use "
                f"({node['others_cpu_s']:.3g} of {node['wall_s'] * node['cpus']:.3g} CPU-s)"
            )
    for host, on_host in sorted((gpus or {}).items()):
        for bus, gpu in sorted(on_host.items()):
            if gpu["others"]:
                out.append(
                    f"busy device: the GPU at {bus} on {host} ran {gpu['others']} other process(es) beside the job's "
                    f"{gpu['ranks']} rank(s) (NVML lists them, as nvidia-smi does)"
                )
    return out


def host_record(per_rank: list[dict], hosts: list[str]) -> dict:
    """report.json's ``host``: each rank's compute threads and load, each node's load beside its ranks, each GPU's
    processes beside the job's ranks, and the reasons the run measured a busy host or device."""
    nodes, gpus = node_load(per_rank, hosts), node_gpus(per_rank, hosts)
    return {"per_rank": per_rank, "nodes": nodes, "gpus": gpus, "busy": busy_reasons(nodes, gpus)}


HOST_FIX = (
    "run when the node is quiet (or on nodes of the job's own), and keep each rank's compute threads within its "
    "share of the cores (spmd's default; OMP_NUM_THREADS sets it)"
)
DEVICE_FIX = "run on GPUs no other process uses (nvidia-smi lists each GPU's processes)"

"""``spmd topo``: the GPUs of this node, their links, peer access, and measured copy speeds (the heat
map of them is drawn by ``report.heatmap.heatmap_png``).

Copies are timed with perf_counter around ``iters`` copies, with both devices synchronized
before and after: P2P bandwidth and latency between every ordered pair (cudaMemcpyPeer,
with peer access enabled where the hardware allows it), host-to-device and device-to-host
with pinned and with pageable host memory.
"""

from __future__ import annotations

import time

import numpy as np

from ..core import xp as xpmod
from ..core.topology import gpu_pair_link

LATENCY_BYTES = 8
LATENCY_ITERS = 200


def gpu_list() -> list[dict]:
    """Every visible GPU: index, name, memory, PCI bus id."""
    cupy = xpmod.cupy
    out = []
    for i in range(xpmod.gpu_count()):
        props = cupy.cuda.runtime.getDeviceProperties(i)
        out.append(
            {
                "index": i,
                "name": xpmod.device_name(i),
                "memory_GiB": props["totalGlobalMem"] / 2**30,
                "pci_bus_id": xpmod.device_pci_bus_id(i),
            }
        )
    return out


def _sync(*devices: int) -> None:
    for d in devices:
        xpmod.cupy.cuda.Device(d).synchronize()


def _enable_peer(a: int, b: int) -> bool:
    runtime = xpmod.cupy.cuda.runtime
    if not runtime.deviceCanAccessPeer(a, b):
        return False
    with xpmod.cupy.cuda.Device(a):
        try:
            runtime.deviceEnablePeerAccess(b)
        except runtime.CUDARuntimeError as exc:  # already enabled is fine
            if "PeerAccessAlreadyEnabled" not in str(exc):
                raise
    return True


def p2p_copy(src: int, dst: int, nbytes: int, iters: int) -> dict:
    """Bandwidth (GB/s) of ``nbytes`` copies and latency (us) of 8-byte copies from ``src`` to ``dst``."""
    cupy = xpmod.cupy
    _enable_peer(dst, src)
    _enable_peer(src, dst)
    with cupy.cuda.Device(src):
        a = cupy.ones(nbytes, dtype=np.uint8)
    with cupy.cuda.Device(dst):
        b = cupy.zeros(nbytes, dtype=np.uint8)

    def copies(size, count):
        _sync(src, dst)
        t0 = time.perf_counter()
        for _ in range(count):
            cupy.cuda.runtime.memcpyPeer(b.data.ptr, dst, a.data.ptr, src, size)
        _sync(src, dst)
        return (time.perf_counter() - t0) / count

    copies(nbytes, 1)  # warm-up
    seconds = copies(nbytes, iters)
    latency = copies(LATENCY_BYTES, LATENCY_ITERS)
    with cupy.cuda.Device(dst):
        ok = bool(int(b[:16].sum()) == 16)  # the copy arrived
    return {"GBps": nbytes / seconds / 1e9, "latency_us": latency * 1e6, "verified": ok}


def host_copies(device: int, nbytes: int, iters: int) -> dict:
    """H2D and D2H bandwidth (GB/s) with pinned and pageable host memory."""
    cupy = xpmod.cupy
    out = {}
    with cupy.cuda.Device(device):
        d = cupy.empty(nbytes, dtype=np.uint8)
        for kind, host in (
            ("pinned", xpmod.empty_host(nbytes, np.uint8, pinned=True)),
            ("pageable", np.empty(nbytes, dtype=np.uint8)),
        ):
            host.fill(1)  # touch every page before timing
            for direction, copy in (("h2d", lambda: d.set(host)), ("d2h", lambda: d.get(out=host))):
                copy()
                _sync(device)
                t0 = time.perf_counter()
                for _ in range(iters):
                    copy()
                _sync(device)
                out[f"{direction}_{kind}"] = nbytes * iters / (time.perf_counter() - t0) / 1e9
    return out


def measure_topology(nbytes: int, iters: int) -> dict:
    """Everything ``spmd topo`` reports for this node (no GPU: an empty list and a note)."""
    if xpmod.gpu_count() == 0:
        why = "CuPy is not installed" if xpmod.cupy is None else "CuPy sees no CUDA device"
        return {"gpus": [], "note": f"no GPU visible ({why}): nothing to measure", "warnings": []}
    gpus = gpu_list()
    n = len(gpus)
    runtime = xpmod.cupy.cuda.runtime
    peer = [[i == j or bool(runtime.deviceCanAccessPeer(i, j)) for j in range(n)] for i in range(n)]
    links = [
        [
            None
            if i == j
            else dict(zip(("class", "detail"), gpu_pair_link(gpus[i]["pci_bus_id"], gpus[j]["pci_bus_id"])))
            for j in range(n)
        ]
        for i in range(n)
    ]
    p2p = [[None if i == j else p2p_copy(i, j, nbytes, iters) for j in range(n)] for i in range(n)]
    host = [host_copies(i, nbytes, iters) for i in range(n)]
    warnings = [
        f"GPU {i} -> GPU {j}: no peer access, copies go through host memory"
        for i in range(n)
        for j in range(n)
        if not peer[i][j]
    ]
    warnings += [
        f"GPU {i} -> GPU {j}: the copied data did not arrive intact"
        for i in range(n)
        for j in range(n)
        if p2p[i][j] and not p2p[i][j]["verified"]
    ]
    return {
        "gpus": gpus,
        "peer_access": peer,
        "links": links,
        "p2p": p2p,
        "host": host,
        "bytes": nbytes,
        "iters": iters,
        "warnings": warnings,
        "note": None,
    }


def format_topology(host: str, topo: dict) -> str:
    if not topo["gpus"]:
        return f"spmd topo on {host}: {topo['note']}\n"
    n = len(topo["gpus"])
    lines = [f"spmd topo on {host}: {n} GPU(s); copies of {topo['bytes'] >> 20} MiB x {topo['iters']}", ""]
    lines += [
        f"  GPU {g['index']}: {g['name']}, {g['memory_GiB']:.0f} GiB, PCI {g['pci_bus_id']}" for g in topo["gpus"]
    ]
    lines += ["", "links:"] + [
        f"  GPU {i} - GPU {j}: {topo['links'][i][j]['detail']}" for i in range(n) for j in range(i + 1, n)
    ]
    cols = "".join(f"{'GPU ' + str(j):>10}" for j in range(n))
    for title, key, fmt in (
        ("peer access (row -> column)", None, None),
        ("P2P copy bandwidth (GB/s, row -> column)", "GBps", "{:.1f}"),
        ("P2P copy latency (us, 8 B)", "latency_us", "{:.1f}"),
    ):
        lines += ["", title, f"{'':>8}{cols}"]
        for i in range(n):
            cells = []
            for j in range(n):
                if key is None:
                    cells.append("yes" if topo["peer_access"][i][j] else "NO")
                else:
                    cells.append("-" if topo["p2p"][i][j] is None else fmt.format(topo["p2p"][i][j][key]))
            lines.append(f"{'GPU ' + str(i):>8}" + "".join(f"{c:>10}" for c in cells))
    lines += [
        "",
        f"{'host copies (GB/s)':<20}{'h2d pinned':>12}{'d2h pinned':>12}{'h2d pageable':>14}{'d2h pageable':>14}",
    ]
    for i, h in enumerate(topo["host"]):
        lines.append(
            f"{'GPU ' + str(i):<20}{h['h2d_pinned']:>12.1f}{h['d2h_pinned']:>12.1f}"
            f"{h['h2d_pageable']:>14.1f}{h['d2h_pageable']:>14.1f}"
        )
    lines += [""] + [f"warning: {w}" for w in topo["warnings"]]
    return "\n".join(lines).rstrip() + "\n"

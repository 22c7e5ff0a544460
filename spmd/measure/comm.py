"""``spmd bench comm``: collectives over each backend, checked and reported as nccl-tests does."""

from __future__ import annotations

import numpy as np

from ..comm.factory import open_communicator, open_subcommunicator
from ..core.errors import BackendUnavailable
from ..core.units import fmt_bytes
from .collectives import COLLECTIVES, algbw_busbw, measure
from .cores import format_cores, node_cores
from .io import format_host_read, host_read

REDUCING = ("allreduce", "reduce_scatter")
WARM_BYTES = 1 << 20  # before the first size: this op at 1 MiB for about WARM_SECONDS, so connection
WARM_SECONDS = 0.2  # set-up and GPU clocks ramping up do not land in the smallest sizes' times


def size_series(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """min, min x factor, ... up to max (nccl-tests' -b -e -f)."""
    if min_bytes < 1 or max_bytes < min_bytes or factor < 2:
        raise ValueError("need 1 <= min-bytes <= max-bytes and factor >= 2")
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


def bench_comm(
    ctx, op: str, backends: list[str], sizes: list[int], dtype: str, iters: int, warmup: int, explicit: bool
) -> dict:
    """Measure ``op`` at every size on every backend of ``backends`` (device already bound).

    A backend that cannot run here is an error when asked for by name (``explicit``), and
    listed under ``skipped`` with the reason for ``--backend all``.
    """
    results, skipped = {}, {}
    for name in backends:
        try:
            comm = open_communicator(ctx, name)
        except BackendUnavailable as exc:
            if explicit:
                raise
            skipped[name] = str(exc)
            continue
        measure(
            comm, ctx.xp, op, min(WARM_BYTES, max(sizes)), dtype, iters=None, target_s=WARM_SECONDS, max_iters=10_000
        )
        rows = []
        for size in sizes:
            m = measure(comm, ctx.xp, op, size, dtype, iters=iters, warmup=warmup)
            algbw, busbw = algbw_busbw(op, comm.size, m["size"], m["seconds"])
            rows.append({**m, "time_us": m["seconds"] * 1e6, "algbw_GBps": algbw / 1e9, "busbw_GBps": busbw / 1e9})
        comm.close()
        results[name] = rows
    return {
        "op": op,
        "dtype": dtype,
        "ranks": ctx.size,
        "device": ctx.device,
        "iters": iters,
        "warmup": warmup,
        "bus_factor": COLLECTIVES[op].bus_factor(ctx.size),
        "results": results,
        "skipped": skipped,
        "wrong": sum(r["wrong"] for rows in results.values() for r in rows),
    }


# what --links times: the reduction collectives, the gathers (matmul) and a ring shift, one send and one receive a
# rank, as a halo's sendrecv (stencil) runs on NCCL's point-to-point transport
LINK_OPS = ("allreduce", "allgather", "sendrecv")


def bench_links(ctx, backend: str, sizes: list[int], dtype: str, iters: int, warmup: int, read_bytes: int = 0) -> dict:
    """The links a machine's collectives run over, for ``spmd predict``: the allreduce, the allgather and a ring
    shift (sendrecv) at every size inside each node (its ranks alone, every node at once, as a job's rings run)
    and over every rank (across the nodes: the shift's slowest rank is one whose neighbour is on another node);
    with ``read_bytes``, the host's shared read ceiling too (``io.host_read``), which a sweep's one and two ranks
    cannot place; on CPUs, what the node's ranks at once cost each other's compute (``cores.node_cores``)."""
    hosts = sorted(set(ctx.hosts))
    per_node = [ctx.hosts.count(h) for h in hosts]
    comm = open_communicator(ctx, backend)
    levels = {}
    node = open_subcommunicator(ctx, comm, hosts.index(ctx.host), ctx.rank)
    for name, group in (("intra", node if min(per_node) > 1 else None), ("world", comm if len(hosts) > 1 else None)):
        if group is None:
            continue
        measure(group, ctx.xp, "allreduce", min(WARM_BYTES, max(sizes)), dtype, iters=None, target_s=WARM_SECONDS)
        curves = {}
        for op in LINK_OPS:
            rows = []
            for size in sizes:  # bytes per rank (allgather's nccl-tests size is the gathered output)
                m = measure(group, ctx.xp, op, size * (group.size if op == "allgather" else 1), dtype, iters, warmup)
                per_rank = m["size"] // group.size if op == "allgather" else m["size"]
                rows.append({"bytes": per_rank, "seconds": m["seconds"], "wrong": m["wrong"]})
            # every node's ranks timed their own ring: the slowest node's time is the level's, every node's
            # errors count
            for row in rows:
                both = np.array([row["seconds"], row["wrong"] if name == "intra" and group.rank == 0 else 0.0])
                ctx.allreduce_host(both[:1], op="max")
                ctx.allreduce_host(both[1:], op="sum")
                row["seconds"] = float(both[0])
                row["wrong"] = int(both[1]) if name == "intra" else row["wrong"]
            curves[op] = rows
        levels[name] = {"ranks": group.size, "rows": curves["allreduce"], **{op: curves[op] for op in LINK_OPS[1:]}}
    node.close()
    comm.close()
    reads = host_read(ctx, read_bytes) if read_bytes > 0 else None
    cores = node_cores(ctx) if ctx.device == "cpu" else None
    return {
        "kind": "links",
        "backend": comm.name,
        "device": ctx.device,
        "dtype": dtype,
        "ranks": ctx.size,
        "nodes": len(hosts),
        "ranks_per_node": max(per_node),
        "uneven": len(set(per_node)) > 1,
        "levels": levels,
        "host_read": reads,
        "node_cores": cores,
        "wrong": sum(r["wrong"] for level in levels.values() for op in ("rows", *LINK_OPS[1:]) for r in level[op]),
    }


def format_links(links: dict) -> str:
    """The measured levels, one line per size: time and bus bandwidth inside a node and across nodes."""
    lines = [
        f"# spmd bench comm --links: allreduce over {links['backend']}, {links['ranks']} rank(s) on "
        f"{links['nodes']} node(s), {links['ranks_per_node']} a node"
    ]
    for name, level in links["levels"].items():
        lines.append(f"# {'inside a node' if name == 'intra' else 'over every rank'}: {level['ranks']} rank(s)")
        ops = [op for op in LINK_OPS if op == "allreduce" or level.get(op)]  # a file of an older spmd has fewer
        lines.append(f"#{'size':>11}" + "".join(f" {op:>10} {'busbw':>8}" for op in ops) + f" {'#wrong':>6}")
        for i, r in enumerate(level["rows"]):
            line, wrong = f"{r['bytes']:>12}", 0
            for op in ops:
                row = r if op == "allreduce" else level[op][i]
                nbytes = row["bytes"] * (level["ranks"] if op == "allgather" else 1)  # nccl-tests' size
                busbw = algbw_busbw(op, level["ranks"], nbytes, row["seconds"])[1]
                line += f" {row['seconds'] * 1e6:>10.2f} {busbw / 1e9:>8.3f}"
                wrong += row["wrong"]
            lines.append(f"{line} {wrong:>6}")
    if not links["levels"]:
        lines.append("# one rank a node on one node: no link to measure")
    if links.get("host_read"):
        lines += format_host_read(links["host_read"])
    if links.get("node_cores"):
        lines += format_cores(links["node_cores"])
    return "\n".join(lines) + "\n"


def format_tables(bench: dict) -> str:
    """One nccl-tests style table per backend, then the backends side by side."""
    redop = "sum" if bench["op"] in REDUCING else "none"
    root = "0" if bench["op"] == "bcast" else "-1"
    lines = []
    for name, rows in bench["results"].items():
        lines += [
            f"# spmd bench comm: {bench['op']} over {name}, {bench['ranks']} rank(s) on {bench['device']}, "
            f"{bench['iters']} iterations after {bench['warmup']} warm-up, bus factor {bench['bus_factor']:.4g}",
            f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} {'time':>9} {'algbw':>7} "
            f"{'busbw':>7} {'#wrong':>6}",
            f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'':>5} {'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7}",
        ]
        for r in rows:
            lines.append(
                f"{r['size']:>12} {r['count']:>12} {_type(bench['dtype']):>8} {redop:>6} {root:>5} "
                f"{r['time_us']:>9.2f} {r['algbw_GBps']:>7.2f} {r['busbw_GBps']:>7.2f} {r['wrong']:>6}"
            )
        avg = sum(r["busbw_GBps"] for r in rows) / len(rows) if rows else 0.0
        wrong = sum(r["wrong"] for r in rows)
        lines += [
            f"# Out of bounds values : {wrong} {'FAILED' if wrong else 'OK'}",
            f"# Avg bus bandwidth    : {avg:.4g}",
            "",
        ]
    for name, why in bench["skipped"].items():
        lines.append(f"# {name}: skipped: {why}")
    if len(bench["results"]) > 1:
        lines += ["", side_by_side(bench)]
    return "\n".join(lines).rstrip() + "\n"


def side_by_side(bench: dict) -> str:
    """Time per size on each backend and its ratio to the fastest backend at that size."""
    names = list(bench["results"])
    header = f"{'size':>10} " + " ".join(f"{n + ' us':>14} {'x fastest':>9}" for n in names) + "  fastest"
    lines = [header]
    for i, size in enumerate(r["size"] for r in bench["results"][names[0]]):
        times = {n: bench["results"][n][i]["time_us"] for n in names}
        best = min(times, key=times.get)
        lines.append(
            f"{fmt_bytes(size):>10} "
            + " ".join(f"{times[n]:>14.2f} {times[n] / times[best]:>9.2f}" for n in names)
            + f"  {best}"
        )
    return "\n".join(lines)


def _type(dtype: str) -> str:
    return {"float32": "float", "float64": "double", "int32": "int32", "float16": "half"}.get(dtype, dtype)

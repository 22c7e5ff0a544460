"""A run's timeline as a Chrome trace (the JSON event format Perfetto and chrome://tracing open).

One process per rank (``rank R on HOST, GPU G``), one thread per track of work (the repeats; host phases; the
GPU's compute stream; copy and communication streams where spmd records CUDA events), every phase of every
repeat a complete event ("ph": "X") in microseconds on one clock shared by all ranks (spmd.core.clock: rank 0's
perf_counter, each rank's offset and its uncertainty in ``otherData``). Communication phases carry the
collectives of a repeat and their bytes.
"""

from __future__ import annotations

from ..core.units import fmt_bytes

TRACK_ORDER = ("repeats", "host", "gpu", "gpu copy stream", "gpu comm stream", "comm")
COMM_PHASES = ("comm", "comm_overlapped", "allreduce", "comm_exposed")


def track_ids(timelines: list[list[dict]]) -> dict[str, int]:
    """Every track seen, numbered: the known ones in TRACK_ORDER first, then others by name."""
    seen = {span[1] for repeats in timelines for rep in repeats for span in rep["spans"]}
    ordered = [t for t in TRACK_ORDER if t in seen] + sorted(seen - set(TRACK_ORDER))
    return {track: i for i, track in enumerate(ordered)}


def rank_devices(report: dict) -> dict[int, dict]:
    """report.json's device record of each rank (from ``nodes``), by rank."""
    return {d["rank"]: d for node in report.get("nodes", []) for d in node.get("devices", [])}


def process_name(rank: int, host: str, device: dict | None) -> str:
    where = f"GPU {device['device_id']}" if device and device.get("device_id") is not None else "CPU"
    return f"rank {rank} on {host}, {where}"


def track_name(track: str, device: dict | None) -> str:
    gpu = f"GPU {device['device_id']}" if device and device.get("device_id") is not None else "GPU"
    return {
        "repeats": "repeats",
        "host": "host (phases timed on the CPU)",
        "gpu": f"{gpu} compute stream",
        "gpu copy stream": f"{gpu} copy stream",
        "gpu comm stream": f"{gpu} communication stream",
        "comm": "communication",
    }.get(track, track)


def collectives_label(problem: dict | None, ranks: int) -> tuple[str, list[dict]]:
    """' (allreduce 40 B)' and the list of a repeat's collectives from report.json's ``problem`` (a rank alone lists
    the halos it would exchange with neighbours, for the scaling model: it sends none)."""
    items = [c for c in (problem or {}).get("comm", []) if isinstance(c, dict)]
    items = [c for c in items if ranks > 1 or c.get("op") != "sendrecv"]
    if not items:
        return "", []
    words = ", ".join(
        f"{c['op']} {fmt_bytes(c['bytes'])}" + (f" x{c['calls']:g}" if c.get("calls", 1) != 1 else "")
        for c in items[:4]
    )
    return f" ({words}{', ...' if len(items) > 4 else ''})", items


def chrome_trace(
    timelines: list[list[dict]],
    hosts: list[str],
    devices: list[dict | None],
    clock: dict,
    problem: dict | None,
    meta: dict,
) -> dict:
    """The trace of ``timelines`` (per rank, its repeats as {index, warmup, start (shared clock, s), spans}).

    ``devices``: per rank its device record (``device_id``) or None; ``meta``: what the trace's ``otherData``
    says of the run (workload, ranks, command)."""
    ids = track_ids(timelines)
    starts = [rep["start"] for repeats in timelines for rep in repeats]
    origin = min(starts) if starts else 0.0
    label, collectives = collectives_label(problem, len(timelines))
    events: list[dict] = []
    for rank, repeats in enumerate(timelines):
        device = devices[rank] if rank < len(devices) else None
        events.append(
            {
                "name": "process_name",
                "ph": "M",
                "pid": rank,
                "tid": 0,
                "args": {"name": process_name(rank, hosts[rank], device)},
            }
        )
        events.append({"name": "process_sort_index", "ph": "M", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
        for track, tid in ids.items():
            events.append(
                {"name": "thread_name", "ph": "M", "pid": rank, "tid": tid, "args": {"name": track_name(track, device)}}
            )
            events.append(
                {"name": "thread_sort_index", "ph": "M", "pid": rank, "tid": tid, "args": {"sort_index": tid}}
            )
        for rep in repeats:
            base = (rep["start"] - origin) * 1e6
            for name, track, start, end in rep["spans"]:
                args = {"repeat": rep["index"], "warmup": rep["warmup"]}
                shown = f"repeat {rep['index']}" + (" (warm-up)" if rep["warmup"] else "") if name == "repeat" else name
                if name in COMM_PHASES and collectives:
                    shown += label
                    args["collectives"] = collectives
                events.append(
                    {
                        "name": shown,
                        "cat": name,
                        "ph": "X",
                        "pid": rank,
                        "tid": ids[track],
                        "ts": round(base + start * 1e6, 3),
                        "dur": round(max(0.0, end - start) * 1e6, 3),
                        "args": args,
                    }
                )
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            **meta,
            "clock": clock,
            "time_origin_s": origin,
            "time_unit": "microseconds from the first repeat's start on rank 0's clock",
        },
    }

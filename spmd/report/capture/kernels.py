"""What each rank's captured steps did, from its torch.profiler (Kineto) trace, computed here (never by Holistic
Trace Analysis, which tests/unit/test_kernels.py holds it against on real GPU traces).

A step is the span of one ``ProfilerStep#k`` annotation; a GPU event (kernel, memcpy, memset) belongs to the step
whose span holds its launch (the CUDA runtime call with the same correlation id). On a GPU, step k runs from its
first event's start to step k+1's first event's start (the last: to its last event's end), so the steps tile the
device's time. Per step:

- ``busy``: the union of every GPU event, on every stream; ``idle`` = the step's span minus it;
- ``compute``, ``comm`` (NCCL kernels), ``memory`` (memcpy/memset): the union of each kind (HTA's kernel types);
- ``idle`` split by what ended each gap in the busy union: ``host`` when the event after the gap was launched
  after the gap began (the launch queue ran dry: the GPU waited for the host thread), ``launch`` when it was
  queued already and the gap is shorter than KERNEL_WAIT_US (back-to-back launch latency), ``other`` the rest
  (waits on events, synchronisation, a peer);
- ``overlap``: the share of the comm union that ran while compute kernels ran.

HTA's own conventions are computed beside, for the comparison: ``temporal`` (over the whole capture: the span
from the first to the last GPU event, idle = span - union, compute = the compute kernels' union, non-compute the
rest) and ``idle_by_stream`` (each stream's gaps between its own consecutive events, split as above).

On a CPU the host is the device: a step splits into time inside PyTorch's operators (the main thread's
outermost ops) and time between them (Python, the framework, the data path); gloo's collectives run on their own
threads (``gloo:*``), their union is ``comm``. A CPU rank cannot be launch-bound.
"""

from __future__ import annotations

import re
import statistics

from ...core.spans import length, union

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
STEP = re.compile(r"^ProfilerStep#(\d+)$")
COMM = re.compile(r"(^nccl)|(ncclKernel)|(ncclDevKernel)")  # HTA's communication pattern (NCCL's part)
MEMORY = re.compile(r"^(Memcpy|Memset)")
CPU_COMM = re.compile(r"^gloo:")
CPU_COLLECTIVES = ("all_reduce", "broadcast")  # a CPU step's collectives matched across ranks (gloo's names)
KERNEL_WAIT_US = 30.0  # HTA's consecutive_kernel_delay (µs): a shorter gap with the kernel queued is launch latency
TOP = 8
NAME_CHARS = 120


def kind(name: str) -> str:
    """A GPU event's kind: ``comm`` (NCCL), ``memory`` (memcpy/memset) or ``compute``."""
    if COMM.search(name):
        return "comm"
    if MEMORY.search(name):
        return "memory"
    return "compute"


def _clip(spans, lo: float, hi: float):
    return [(max(a, lo), min(b, hi)) for a, b in spans if b > lo and a < hi]


def _intersection(a: list, b: list) -> float:
    """The length of the intersection of two unions (sorted, disjoint)."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _steps(events: list[dict]) -> list[tuple[int, float, float]]:
    """The ProfilerStep annotations: (k, start, end) in µs, in order."""
    out = []
    for e in events:
        m = STEP.match(str(e.get("name", "")))
        if m and e.get("ph") == "X" and e.get("cat") in ("user_annotation", "cpu_op"):
            out.append((int(m.group(1)), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    return sorted(out)


def _step_of(t: float, steps) -> int | None:
    for i, (_, a, b) in enumerate(steps):
        if a <= t <= b:
            return i
    return None


def analyze(trace: dict, gpu: bool) -> dict:
    """One rank's captured steps (see the module's docstring); ``{"steps": 0, "why": ...}`` when the trace has
    no step to read."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict)]
    steps = _steps(events)
    if not steps:
        return {"steps": 0, "why": "the trace holds no ProfilerStep annotation"}
    return _analyze_gpu(events, steps) if gpu else _analyze_cpu(events, steps)


# -- GPU ------------------------------------------------------------------------------------


def _gpu_events(events, steps):
    """GPU events as dicts (name, kind, stream, ts, end, launch, step), launched inside a captured step."""
    launch = {}
    launches_per_step = [0] * len(steps)
    for e in events:
        if e.get("cat") in LAUNCH_CATS and e.get("ph") == "X":
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launch[corr] = float(e["ts"])
            if "Launch" in str(e.get("name", "")):
                i = _step_of(float(e["ts"]), steps)
                if i is not None:
                    launches_per_step[i] += 1
    out = []
    for e in events:
        if e.get("cat") not in GPU_CATS or e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        t = launch.get(args.get("correlation"))
        i = _step_of(t, steps) if t is not None else None
        if i is None:
            continue
        ts = float(e["ts"])
        name = str(e.get("name", ""))
        out.append(
            {
                "name": name,
                "kind": kind(name),
                "stream": int(args.get("stream", e.get("tid", 0)) or 0),
                "ts": ts,
                "end": ts + float(e.get("dur", 0)),
                "launch": t,
                "step": i,
            }
        )
    out.sort(key=lambda g: g["ts"])
    return out, launches_per_step


def _idle_split(busy: list[tuple[float, float]], starts: list[dict], lo: float, hi: float) -> dict[str, float]:
    """The gaps of ``busy`` inside [lo, hi] split by the event that ended each (``starts``: events by start)."""
    split = {"host": 0.0, "launch": 0.0, "other": 0.0}
    j = 0
    prev_end = lo
    for a, b in busy:
        if a > prev_end:
            gap = a - prev_end
            while j < len(starts) and starts[j]["ts"] < a:
                j += 1
            nxt = starts[j] if j < len(starts) else None
            split[_gap_kind(gap, prev_end, nxt)] += gap
        prev_end = max(prev_end, b)
    if hi > prev_end:
        split["other"] += hi - prev_end
    return split


def _gap_kind(gap: float, gap_start: float, nxt: dict | None) -> str:
    if nxt is not None and nxt["launch"] > gap_start:
        return "host"
    if gap < KERNEL_WAIT_US:
        return "launch"
    return "other"


def _analyze_gpu(events, steps) -> dict:
    gpu, launches = _gpu_events(events, steps)
    if not gpu:
        return {"steps": 0, "why": "the trace holds no GPU event launched inside a captured step"}
    firsts = {}
    for g in gpu:
        firsts.setdefault(g["step"], g["ts"])
    order = sorted(firsts)
    per_step = []
    for n, i in enumerate(order):
        lo = firsts[i]
        hi = firsts[order[n + 1]] if n + 1 < len(order) else max(g["end"] for g in gpu if g["step"] == i)
        inside = [g for g in gpu if g["end"] > lo and g["ts"] < hi]
        unions = {
            k: union(_clip([(g["ts"], g["end"]) for g in inside if k in (None, g["kind"])], lo, hi))
            for k in (None, "compute", "comm", "memory")
        }
        busy = unions[None]
        idle = _idle_split(busy, [g for g in inside if g["ts"] >= lo], lo, hi)
        comm = unions["comm"]
        per_step.append(
            {
                "step": steps[i][0],
                "span_us": hi - lo,
                "busy_us": length(busy),
                "compute_us": length(unions["compute"]),
                "comm_us": length(comm),
                "memory_us": length(unions["memory"]),
                "idle_us": hi - lo - length(busy),
                "idle": idle,
                "overlapped_comm_us": _intersection(comm, unions["compute"]),
                "kernels": sum(1 for g in gpu if g["step"] == i),
                "launches": launches[i],
                "comm_kernels": [round(g["end"] - g["ts"], 3) for g in gpu if g["step"] == i and g["kind"] == "comm"],
            }
        )
    out = _summary(per_step, gpu_names(gpu))
    out.update(device="gpu", temporal=temporal(gpu), idle_by_stream=idle_by_stream(gpu))
    return out


def gpu_names(gpu: list[dict]) -> dict[str, dict]:
    """Kernel name -> count and total µs over the captured steps."""
    names: dict[str, dict] = {}
    for g in gpu:
        entry = names.setdefault(g["name"][:NAME_CHARS], {"count": 0, "total_us": 0.0, "kind": g["kind"]})
        entry["count"] += 1
        entry["total_us"] += g["end"] - g["ts"]
    return names


def temporal(gpu: list[dict]) -> dict:
    """HTA's temporal breakdown over the capture: idle, compute and non-compute µs within the span from the first
    GPU event's start to the last one's end."""
    every = union([(g["ts"], g["end"]) for g in gpu])
    span = every[-1][1] - every[0][0]
    compute = length(union([(g["ts"], g["end"]) for g in gpu if g["kind"] == "compute"]))
    idle = span - length(every)
    return {"span_us": span, "idle_us": idle, "compute_us": compute, "non_compute_us": span - compute - idle}


def idle_by_stream(gpu: list[dict]) -> dict[str, dict]:
    """HTA's idle-time breakdown: per stream, the gaps between its consecutive events, split into host wait,
    kernel wait (< KERNEL_WAIT_US, the next event queued already) and other (µs)."""
    out: dict[str, dict] = {}
    streams = sorted({g["stream"] for g in gpu})
    for s in streams:
        mine = [g for g in gpu if g["stream"] == s]
        split = {"host": 0.0, "launch": 0.0, "other": 0.0}
        for prev, g in zip(mine, mine[1:]):
            gap = g["ts"] - prev["end"]
            if gap > 0:
                split[_gap_kind(gap, prev["end"], g)] += gap
        out[str(s)] = split
    return out


# -- CPU ------------------------------------------------------------------------------------


def _serial(spans: list[tuple[float, float]]) -> list[float]:
    """Each collective's time not already spent in the one before it ((start, duration) in start order): gloo keeps
    two of a coalesced broadcast in flight, and a rank waiting for a late one waits in both at once."""
    out, free = [], float("-inf")
    for start, duration in spans:
        end = start + duration
        out.append(max(0.0, end - max(start, free)))
        free = max(free, end)
    return out


def _analyze_cpu(events, steps) -> dict:
    main = [e for e in events if STEP.match(str(e.get("name", "")))]
    tid = main[0].get("tid") if main else None
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("tid") == tid and "dur" in e]
    comm_events = [e for e in events if e.get("ph") == "X" and CPU_COMM.match(str(e.get("name", "")))]
    names: dict[str, dict] = {}
    per_step = []
    for k, lo, hi in steps:
        outer = _outermost([e for e in ops if lo <= float(e["ts"]) < hi])
        spans = union(_clip([(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in outer], lo, hi))
        comm = union(_clip([(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in comm_events], lo, hi))
        for e in outer:
            entry = names.setdefault(str(e["name"])[:NAME_CHARS], {"count": 0, "total_us": 0.0, "kind": "compute"})
            entry["count"] += 1
            entry["total_us"] += float(e["dur"])
        busy = length(spans)
        # the step's collectives in order: DDP's broadcast of the buffers before the forward (models with buffers:
        # where an early rank waits for a late one) and the gradients' allreduces
        reduces = sorted(
            (float(e["ts"]), float(e.get("dur", 0)))
            for e in comm_events
            if lo <= float(e["ts"]) < hi and any(op in str(e["name"]) for op in CPU_COLLECTIVES)
        )
        per_step.append(
            {
                "step": k,
                "span_us": hi - lo,
                "busy_us": busy,
                "compute_us": busy,
                "comm_us": length(comm),
                "memory_us": 0.0,
                "idle_us": hi - lo - busy,
                "idle": {"host": 0.0, "launch": 0.0, "other": hi - lo - busy},
                "overlapped_comm_us": _intersection(comm, spans),
                "kernels": len(outer),
                "launches": 0,
                "comm_kernels": [round(d, 3) for d in _serial(reduces)],
            }
        )
    out = _summary(per_step, names)
    out["device"] = "cpu"
    return out


def _outermost(ops: list[dict]) -> list[dict]:
    """The ops not nested inside another (by time, on one thread)."""
    out, end = [], float("-inf")
    for e in sorted(ops, key=lambda e: (float(e["ts"]), -float(e["dur"]))):
        if float(e["ts"]) >= end:
            out.append(e)
            end = float(e["ts"]) + float(e["dur"])
    return out


# -- one rank's summary, and the ranks together ------------------------------------------------


MEDIANS = ("span_us", "busy_us", "compute_us", "comm_us", "memory_us", "idle_us", "overlapped_comm_us", "kernels")


def _summary(per_step: list[dict], names: dict[str, dict]) -> dict:
    median = {k: statistics.median(s[k] for s in per_step) for k in MEDIANS}
    median["launches"] = statistics.median(s["launches"] for s in per_step)
    median["idle"] = {c: statistics.median(s["idle"][c] for s in per_step) for c in ("host", "launch", "other")}
    comm = sum(s["comm_us"] for s in per_step)
    busy = sum(s["busy_us"] for s in per_step) or 1.0
    top = sorted(names.items(), key=lambda kv: -kv[1]["total_us"])
    return {
        "steps": len(per_step),
        "per_step": per_step,
        "median": median,
        "overlap": sum(s["overlapped_comm_us"] for s in per_step) / comm if comm > 0 else None,
        "top": [{"name": n, **v, "share_of_busy": v["total_us"] / busy} for n, v in top[:TOP]],
        "names": {n: v for n, v in top[:64]},
    }


MAX_SPANS = 20_000  # a rank's captured events drawn in the Chrome trace at most


def timeline_spans(trace: dict, gpu: bool) -> list[tuple[str, str, float, float]]:
    """The captured steps as the Chrome trace draws them beside spmd's phases: (name, track, start, end) in
    seconds from the first captured step's start (its ``ProfilerStep``): the steps, and each GPU event on its
    stream's track (on a CPU, the main thread's outermost operators)."""
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict)]
    steps = _steps(events)
    if not steps:
        return []
    origin = steps[0][1]

    def s(t: float) -> float:
        return (t - origin) / 1e6

    spans = [("captured steps (torch.profiler)", "repeats", 0.0, s(max(b for _, _, b in steps)))]
    spans += [(f"captured step {k}", "captured: steps (host)", s(a), s(b)) for k, a, b in steps]
    if gpu:
        gpu_events, _ = _gpu_events(events, steps)
        spans += [(g["name"][:80], f"captured: stream {g['stream']}", s(g["ts"]), s(g["end"])) for g in gpu_events]
    else:
        main = [e for e in events if STEP.match(str(e.get("name", "")))]
        tid = main[0].get("tid") if main else None
        ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("tid") == tid]
        spans += [
            (str(e["name"])[:80], "captured: host operators", s(float(e["ts"])), s(float(e["ts"]) + float(e["dur"])))
            for e in _outermost([e for e in ops if "dur" in e])
        ]
    return spans[:MAX_SPANS]

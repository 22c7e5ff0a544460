"""The one decision of a sweep: from its facts (every measured point with its interval and flags, each fitted model
with its misfit at its own points, the host's state, what was captured) to an answer or none, the limit, the
pay-off, the straggler and its cause, each with its evidence. Words are rendered from it (decision.verdict,
advice, batch_words); nothing downstream decides again. Pure functions over JSON-ready dicts: the decision is
stored in scaling.json as it is.
"""

from __future__ import annotations

from ...core.host import BUSY_SHARE
from ..models.series import OVERLAPPED
from ..models.step import host_wait, per_step
from .flags import LITTLE, miss

FASTER, SLOWER, SAME = "faster", "slower", "no measurable difference"


def outcome(interval: list[float]) -> str:
    """What a speedup's interval says against one rank: faster (all above 1), slower (all below), or neither."""
    if interval[0] > 1:
        return FASTER
    if interval[1] < 1:
        return SLOWER
    return SAME


def host_state(reports: list[dict]) -> dict:
    """The host's state over the sweep's runs (report.json ``host``, spmd.core.host): per host, the runs whose
    other processes took BUSY_SHARE or more of the CPU time its ranks could use (their shares), those whose
    compute threads outnumbered its CPUs, and those with another process on one of its GPUs (the GPU's bus id and
    how many); each rank's compute threads and how they were chosen."""
    busy: dict[str, dict] = {}
    threads = None
    counted = 0
    for report in reports:
        host = report.get("host") or {}
        if not host:
            continue
        counted += 1
        for name, gpus in (host.get("gpus") or {}).items():
            entry = busy.setdefault(name, {"others": [], "threads": [], "devices": []})
            entry["devices"] += [[bus, gpu["others"]] for bus, gpu in sorted(gpus.items()) if gpu.get("others")]
        for name, node in (host.get("nodes") or {}).items():
            entry = busy.setdefault(name, {"others": [], "threads": [], "devices": []})
            share = node.get("others_share")
            if share is not None and share >= BUSY_SHARE:
                entry["others"].append(share)
            if node.get("oversubscribed_threads"):
                entry["threads"].append([node["threads"], node["ranks"], node["cpus"]])
        ranks = host.get("per_rank") or []
        if ranks and threads is None:
            t = ranks[0]["threads"]
            threads = {"per_rank": t.get("chosen") or t.get("compute"), "how": t.get("how")}
    busy = {h: e for h, e in busy.items() if e["others"] or e["threads"] or e["devices"]}
    return {"busy": bool(busy), "hosts": busy, "runs": counted, "threads": threads}


def batch_misses(model: dict | None) -> list[dict]:
    """The step model's misses at its own fitted points (flags.miss), each point marked with its own."""
    if not model:
        return []
    out = []
    for p in model["points"]:
        p["miss"] = miss(p["predicted_speedup"], p["measured_speedup"], p["measured_interval"])
        if p["miss"] and p["fitted"]:
            out.append({"batch": p["batch"], **p["miss"]})
    return out


def array_misses(model: dict | None, series: dict) -> list[dict]:
    """The scaling model's misses at its own fitted points, against each run's measured interval."""
    if not model:
        return []
    rows = {(r["mode"], r["ranks"]): r for rows in series.values() for r in rows}
    out = []
    for p in model["points"]:
        row = rows.get((p["mode"], p["ranks"]))
        interval = (row or {}).get("time_interval") or [p["measured_s"]] * 2
        p["miss"] = miss(p["predicted_s"], p["measured_s"], interval)
        if p["miss"] and p["fitted"]:
            out.append({"mode": p["mode"], "ranks": p["ranks"], **p["miss"]})
    return out


def step_parts(report: dict, captured_host: float | None = None) -> dict[str, float]:
    """Seconds per step of a training run's parts (the slowest rank's median per repeat over its steps): the
    exposed allreduce, DDP's broadcast of the buffers before each forward (models with buffers), SyncBatchNorm's
    gathers in forward (models with it), data, the step's own compute and, where a capture measured it, the GPU's
    wait for its host; scaled so that they never exceed the step (the marked steps' phases can overshoot it)."""
    parts = {
        "allreduce": per_step(report, "comm_exposed"),
        "data": per_step(report, "data"),
        "compute": per_step(report, "forward", "backward", "optimizer"),
    }
    for part, phase in (("buffers", "comm_buffers"), ("syncbn", "comm_syncbn")):
        seconds = per_step(report, phase)
        if seconds > 0:
            parts[part] = seconds
    step = per_step(report, "total")
    if captured_host is not None:
        parts["host"] = captured_host
    timed = sum(parts.values())
    if timed > step > 0:
        parts = {name: v * step / timed for name, v in parts.items()}
    return parts


def limit(report: dict, training: bool, captured_host: float | None = None) -> dict | None:
    """What takes the largest part of the lead run's step (training) or repeat (arrays), with every part's seconds:
    {'part', 'seconds', 'whole_s', 'share', 'parts', 'allreduce_share'}."""
    if "timings" not in report:
        return None
    if training:
        parts = step_parts(report, captured_host)
        whole = per_step(report, "total")
    else:
        skip = ("total", "wait", *OVERLAPPED)
        parts = {p: t["max"] for p, t in report["timings"].items() if p not in skip}
        whole = report["timings"]["total"]["median"]
    if not parts or whole <= 0:
        return None
    name = max(parts, key=parts.get)
    comm = parts.get("allreduce", parts.get("comm", 0.0))
    return {
        "part": name,
        "seconds": parts[name],
        "whole_s": whole,
        "share": parts[name] / whole,
        "parts": parts,
        "comm_share": comm / whole,
        "comm_costs_little": comm / whole < LITTLE,
    }


def settle(reasons: list[str], lead_kind: str) -> str:
    """The one run that would settle a sweep whose every point is suspect, from why they are (never the same run
    again where the cause is outside it)."""
    text = " ".join(reasons)
    if "compute threads over" in text:
        return "the same sweep with each rank's compute threads within its share of the cores (unset OMP_NUM_THREADS)"
    if "busy host" in text or "oversubscribed" in text:
        return "the same sweep on a quiet host: nothing else running on its cores, at most one rank per core"
    if "busy device" in text:
        return "the same sweep on GPUs no other process uses (nvidia-smi lists each GPU's processes)"
    if "one CPU per GPU rank" in text:
        return "the same sweep with several CPUs per rank (mpirun --bind-to none, or srun --cpus-per-task)"
    if "noisy" in text:
        return "the same sweep with more repeats (repeats: auto and a larger max_seconds)"
    if "beyond ideal" in text:
        return (
            f"the {lead_kind}'s 1-rank runs again with more repeats (repeats: auto and a larger max_seconds), on a "
            f"quiet host: their base was slowed by something the runs do not record"
        )
    return "the same sweep with more repeats (repeats: auto and a larger max_seconds)"


def decide(facts: dict) -> dict:
    """The decision (see the module's docstring) from ``facts``: {'training', 'device', 'series', 'model',
    'best', 'break_even', 'batch' (the batch sweep or None), 'reports' (every run's report),
    'lead_reports' ((mode, ranks, batch) -> report), 'captured_batch' (whether the batch runs captured steps)}."""
    host = host_state(facts["reports"])
    training, series, sweep = facts["training"], facts["series"], facts.get("batch")
    units = "GPUs" if facts["device"] == "gpu" else "ranks"
    out: dict = {"training": training, "units": units, "host": host}
    flagged = _flagged(series, sweep)
    out["beyond_ideal"] = flagged
    suspects = _suspects(series, sweep)
    out["suspect"] = suspects
    lead, kind = _lead(series, sweep)
    out["lead"] = lead
    out["answer"] = lead is not None
    out["outcome"] = outcome(lead["interval"]) if lead else None
    out["settle"] = None if lead else settle([w for s in suspects for w in s["reasons"]], kind)
    # the models: trusted only where they meet their own points
    misses = batch_misses((sweep or {}).get("model")) if sweep else []
    amisses = array_misses(facts.get("model"), series)
    out["batch_model"] = _model_state((sweep or {}).get("model"), misses) if sweep else None
    out["array_model"] = _model_state(facts.get("model"), amisses) if facts.get("model") else None
    out["pay_off"] = pay_off(sweep, out["batch_model"]) if sweep and sweep.get("rows") else None
    report = facts["lead_reports"].get(_key(lead)) if lead else None
    if report is None and lead is None:  # no answer: what the largest run spent its time on, for the record
        largest = _largest(series, sweep)
        report = facts["lead_reports"].get(_key(largest)) if largest else None
    out["limit"] = limit(report, training, _captured_host(report)) if report else None
    out["straggler"] = ((report or {}).get("breakdown") or {}).get("straggler") if report else None
    out["link"] = _link(series, sweep, out) if training else None
    out["captured_batch"] = facts.get("captured_batch")
    return out


def _key(point: dict | None):
    if not point:
        return None
    return (point["mode"], point["ranks"], point.get("batch"))


def _flagged(series: dict, sweep: dict | None) -> list[dict]:
    out = [
        {"mode": r["mode"], "ranks": r["ranks"], "speedup": r["speedup"], "flag": f}
        for rows in series.values()
        for r in rows
        for f in r.get("flags") or []
    ]
    for r in (sweep or {}).get("rows") or []:
        for f in r.get("flags") or []:
            out.append(
                {"mode": "batch", "ranks": sweep["ranks"], "batch": r["batch"], "speedup": r["speedup"], "flag": f}
            )
    return out


def _suspects(series: dict, sweep: dict | None) -> list[dict]:
    out = [
        {"mode": r["mode"], "ranks": r["ranks"], "reasons": r["suspect"]}
        for rows in series.values()
        for r in rows
        if r.get("suspect")
    ]
    for r in (sweep or {}).get("rows") or []:
        if r.get("suspect"):
            out.append({"mode": "batch", "ranks": sweep["ranks"], "batch": r["batch"], "reasons": r["suspect"]})
    return out


def _lead(series: dict, sweep: dict | None) -> tuple[dict | None, str]:
    """The point the answer leads with, never a suspect one: the batch sweep's best trustworthy batch, else the
    largest trustworthy run of the strong (or weak) series whose base is trustworthy too."""
    if sweep and sweep.get("rows"):
        good = [r for r in sweep["rows"] if not r.get("suspect")]
        if not good:
            return None, "batch sweep"
        best = max(good, key=lambda r: r["samples_per_s_n"])
        return (
            {
                "mode": "batch",
                "ranks": sweep["ranks"],
                "batch": best["batch"],
                "speedup": best["speedup"],
                "interval": best["speedup_interval"],
                "ideal": sweep["ranks"],
                "samples_per_s": best["samples_per_s_n"],
                "flags": best.get("flags") or [],
            },
            "batch sweep",
        )
    for mode in ("strong", "weak"):
        rows = series.get(mode) or []
        if len(rows) < 2:
            continue
        if rows[0].get("suspect"):  # every speedup of the series rests on its base
            return None, f"{mode} series"
        good = [r for r in rows[1:] if not r.get("suspect")]
        if not good:
            return None, f"{mode} series"
        r = good[-1]
        return (
            {
                "mode": mode,
                "ranks": r["ranks"],
                "batch": (r.get("result") or {}).get("batch_per_rank"),
                "base_ranks": rows[0]["ranks"],
                "speedup": r["speedup"],
                "interval": r.get("speedup_interval") or [r["speedup"]] * 2,
                "ideal": r["ranks"] / rows[0]["ranks"],
                "time": r["time"],
                "samples_per_s": _samples_per_s(r),
                "flags": r.get("flags") or [],
            },
            f"{mode} series",
        )
    return None, "sweep"


def _largest(series: dict, sweep: dict | None) -> dict | None:
    if sweep and sweep.get("rows"):
        return {"mode": "batch", "ranks": sweep["ranks"], "batch": sweep["rows"][-1]["batch"]}
    rows = series.get("strong") or series.get("weak") or []
    if not rows:
        return None
    r = rows[-1]
    return {"mode": r["mode"], "ranks": r["ranks"], "batch": (r.get("result") or {}).get("batch_per_rank")}


def _samples_per_s(row: dict) -> float | None:
    r = row.get("result") or {}
    if "global_batch" not in r or not row.get("time"):
        return None
    return r["global_batch"] * r["steps_per_repeat"] / row["time"]


def _model_state(model: dict | None, misses: list[dict]) -> dict | None:
    if model is None:
        return {"fitted": False, "trusted": False, "misses": []}
    return {"fitted": True, "trusted": not misses, "misses": misses}


def pay_off(sweep: dict, state: dict | None) -> dict:
    """Where N GPUs pay off: measured (the smallest trustworthy batch whose interval lies above 1x) and predicted
    (the step model's break-even, only from a model that meets its own points)."""
    good = [r for r in sweep["rows"] if not r.get("suspect")]
    paid = [r["batch"] for r in good if r["speedup_interval"][0] > 1]
    model = sweep.get("model")
    predicted = model["break_even_batch"] if model and state and state["trusted"] else None
    return {
        "measured_batch": min(paid) if paid else None,
        "measured_over": [r["batch"] for r in good],
        "predicted_batch": predicted,
        "predicted": bool(model and state and state["trusted"]),
    }


def _captured_host(report: dict | None) -> float | None:
    return host_wait(report) if report else None


def _link(series: dict, sweep: dict | None, decision: dict) -> dict | None:
    """Where the strong series and the batch sweep answer differently, what links them: the strong series keeps the
    global batch, so its largest run's per-GPU batch is smaller than its base's."""
    rows = series.get("strong") or []
    if len(rows) < 2 or not sweep or not sweep.get("rows"):
        return None
    last = rows[-1]
    strong = outcome(last.get("speedup_interval") or [last["speedup"]] * 2)
    pay = decision.get("pay_off") or {}
    batch = (last.get("result") or {}).get("batch_per_rank")
    lead = decision.get("lead")
    if lead is None or batch is None or strong == decision.get("outcome"):
        return None
    return {"strong_outcome": strong, "strong_ranks": last["ranks"], "strong_batch": batch, **pay}

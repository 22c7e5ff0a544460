"""The answer for a training job (workloads torch and train): one verdict at the top, and findings in the job's
own terms (per-GPU batch, samples/s, the allreduce of the gradients, steps), never the array workloads' (problem
bytes, bytes per rank, file opens).

The verdict: "on this machine, N GPUs give X samples/s at per-GPU batch b (S x one GPU's); they pay off from
per-GPU batch B; what limits it: ...", from the batch sweep where there is one (its best trustworthy batch) and
otherwise the strong series' largest run. What limits it is the largest per-step part of that run's step: the
allreduce left exposed, the GPU idle waiting for its host (captured kernels), the data phase, or the step's own
compute; a suspect point is named with the run that would settle it.
"""

from __future__ import annotations

from ...core.units import fmt_seconds
from ..models.step import host_wait, per_step
from .batch_words import pay_off_sentence, unit_words


def is_training(report: dict) -> bool:
    """Whether a run is a training job's (its result has a per-rank batch)."""
    return "batch_per_rank" in (report.get("result") or {})


def samples_per_s(row: dict) -> float:
    """A series row's samples/s (the global batch of each step over the time per repeat)."""
    r = row["result"]
    return r["global_batch"] * r["steps_per_repeat"] / row["time"]


def series_advice(rows: list[dict]) -> list[str]:
    """A series of a training job in its terms: samples/s from the fewest to the most ranks, speedup and
    efficiency with their intervals, and where adding ranks made it slower."""
    if len(rows) < 2:
        return []
    base, last = rows[0], rows[-1]
    units, _ = unit_words({"device": base.get("device")})
    what = (
        f"global batch {base['result']['global_batch']} kept"
        if base["mode"] == "strong"
        else f"per-{units[:-1]} batch {base['result']['batch_per_rank']} kept"
    )
    iv = last.get("speedup_interval") or [last["speedup"]] * 2
    out = [
        f"{base['mode'].capitalize()} scaling ({what}), {base['ranks']} -> {last['ranks']} {units}: "
        f"{samples_per_s(base):,.0f} -> {samples_per_s(last):,.0f} samples/s, {last['speedup']:.2f}x "
        f"(interval {iv[0]:.2f}x-{iv[1]:.2f}x), efficiency {last['efficiency']:.0%}."
    ]
    for prev, cur in zip(rows, rows[1:]):
        if cur["mode"] == "strong" and cur["time_interval"][0] > prev["time_interval"][1]:
            out.append(
                f"Adding {units} made the job slower: {prev['ranks']} -> {cur['ranks']} {units} gave "
                f"{samples_per_s(prev):,.0f} -> {samples_per_s(cur):,.0f} samples/s (intervals apart); "
                + limit_sentence(cur)
                + "."
            )
    return out


def step_parts(report: dict) -> dict[str, float]:
    """Seconds per step of a run's parts (slowest rank's median per repeat over its steps): the exposed
    allreduce, data, the step's own compute, and (captured GPU runs) the GPU's wait for its host."""
    parts = {
        "allreduce": per_step(report, "comm_exposed"),
        "data": per_step(report, "data"),
        "compute": per_step(report, "forward", "backward", "optimizer"),
    }
    step = per_step(report, "total")
    timed = sum(parts.values())
    if timed > step > 0:  # the marked steps' phases, scaled to the window, can overshoot the step: share it out
        parts = {name: v * step / timed for name, v in parts.items()}
    host = host_wait(report)
    if host is not None:
        parts["host"] = host
    return parts


def limit_sentence(row_or_report: dict) -> str:
    """What limits a run's step, with its numbers."""
    report = row_or_report.get("report", row_or_report)
    if "timings" not in report:
        return "what limits it is not recorded"
    parts = step_parts(report)
    step = per_step(report, "total")
    name = max(parts, key=parts.get)
    x = f"{fmt_seconds(parts[name]).strip()} of a {fmt_seconds(step).strip()} step"
    return {
        "allreduce": f"what limits it: the allreduce of the gradients left exposed ({x}; a bigger per-GPU batch, "
        f"accumulate or a faster link hide or shrink it)",
        "host": f"what limits it: the host ({x} the GPU waited for its host to launch work: the step less the "
        f"device's own captured kernels; CUDA graphs, strategy ddp-graph, remove it; a bigger batch amortises it)",
        "data": f"what limits it: the data phase ({x}: the batches reach the device late)",
        "compute": f"what limits it: the step's own compute ({x}: the {unit_words(report)[0]} are busy with the "
        f"model itself, the allreduce costs little)",
    }[name]


def verdict(series: dict, sweep: dict | None, reports: dict) -> str | None:
    """One line at the top of the answer (see the module's docstring); ``reports``: (mode, ranks, batch) -> report
    of the runs."""
    if sweep and sweep.get("rows"):
        n = sweep["ranks"]
        good = [r for r in sweep["rows"] if not r["suspect"]] or sweep["rows"]
        best = max(good, key=lambda r: r["samples_per_s_n"])
        report = reports.get(("batch", n, best["batch"]))
        units, one = unit_words({"device": (report or {}).get("device")})
        lo, hi = best["speedup_interval"]
        line = (
            f"Verdict: on this machine, {n} {units} give {best['samples_per_s_n']:,.0f} samples/s at per-"
            f"{units[:-1]} batch {best['batch']} ({best['speedup']:.2f}x {one}'s, interval {lo:.2f}x-{hi:.2f}x)"
        )
        if sweep.get("model"):
            line += "; " + pay_off_sentence(sweep["rows"], sweep["model"], n, {"device": (report or {}).get("device")})
        line += "; " + (limit_sentence(report) if report else "what limits it is not recorded")
        suspect = [r for r in sweep["rows"] if r["suspect"]]
        if suspect:
            line += "; not trusted: " + "; ".join(f"batch {r['batch']}: {r['suspect'][0]}" for r in suspect)
        return line + "."
    rows = series.get("strong") or series.get("weak") or []
    if len(rows) < 2:
        return None
    last = rows[-1]
    report = reports.get((last["mode"], last["ranks"], last["result"]["batch_per_rank"]))
    units, one = unit_words({"device": last.get("device")})
    iv = last.get("speedup_interval") or [last["speedup"]] * 2
    line = (
        f"Verdict: on this machine, {last['ranks']} {units} give {samples_per_s(last):,.0f} samples/s at per-"
        f"{units[:-1]} batch {last['result']['batch_per_rank']} ({last['speedup']:.2f}x {one}'s, interval "
        f"{iv[0]:.2f}x-{iv[1]:.2f}x)"
    )
    if iv[1] < 1:
        line += f": more {units} make this job slower"
    elif iv[0] > 1:
        line += f": more {units} pay off"
    else:
        line += f": the runs cannot tell whether more {units} pay off"
    line += "; " + (limit_sentence(report) if report else "what limits it is not recorded")
    if last.get("suspect"):
        line += f"; not trusted: {last['suspect'][0]} (rerun it, or use repeats: auto)"
    return line + " (spmd scale --batches says from which per-GPU batch they pay off)."

"""A training job's findings (workloads torch and train) in its own terms (per-GPU batch, samples/s, the allreduce
of the gradients, steps), never the array workloads' (problem bytes, bytes per rank, file opens). Its verdict is the
decision's (decision.verdict); a run's limit here is the decision's rule (decide.limit) in the verdict's words.
"""

from __future__ import annotations

from ..models.step import host_wait
from .batch_words import unit_words
from .decide import limit
from .verdict import limit_words


def is_training(report: dict) -> bool:
    """Whether a run is a training job's (its result has a per-rank batch)."""
    return "batch_per_rank" in (report.get("result") or {})


def samples_per_s(row: dict) -> float:
    """A series row's samples/s (the global batch of each step over the time per repeat)."""
    r = row["result"]
    return r["global_batch"] * r["steps_per_repeat"] / row["time"]


def training_series_advice(rows: list[dict]) -> list[str]:
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


def limit_sentence(row: dict) -> str:
    """What limits a run's step, with its numbers: the decision's limit of that run (decide.limit), in its words."""
    report = row.get("report", row)
    if "timings" not in report:
        return "what limits it is not recorded"
    lim = limit(report, True, host_wait(report))
    units = unit_words({"device": report.get("device") or row.get("device")})[0]
    return limit_words(lim, True, units) if lim else "what limits it is not recorded"

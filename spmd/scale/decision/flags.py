"""The flags a measured point carries, one rule each, used by the sweep, the decision and predict alike.

- beyond ideal: a speedup above what its ranks can give (N ranks: N times one's). Flagged wherever it appears;
  a point whose whole interval lies above the ideal is also suspect (the measurement itself says the base run was
  slowed by something else, or a cache effect made the work cheaper).
- noisy: the interval of the time per repeat wider than +-BOUND of its median.
- busy host: compute threads beyond the node's CPUs, or other processes taking BUSY_SHARE of the CPU time the
  ranks could use; busy device: a GPU that ran another process beside the job's ranks (spmd.core.host).
- suspect: any of the above that makes a careful reader doubt the point (beyond ideal surely, noisy, a busy or
  oversubscribed host, a busy device, GPU ranks bound to one CPU): a suspect point never leads an answer and is
  kept out of fits.
- miss: a model's prediction outside the measured interval and more than MODEL_TOLERANCE off.
"""

from __future__ import annotations

from ...core.stats import BOUND, LEVEL
from ..models.series import time_interval

MODEL_TOLERANCE = 0.10  # a prediction within 10% of the measurement is not a miss, whatever the interval
LITTLE = 0.10  # a part of a step below this share of it "costs little"; from it on, it is named with its share


def beyond_ideal(speedup: float, ideal: float, ranks: int) -> str | None:
    """'beyond ideal: ...' when ``speedup`` exceeds ``ideal`` (what ``ranks`` ranks can give), else None."""
    if speedup <= ideal * (1 + 1e-9):
        return None
    return f"beyond ideal: {speedup:.2f}x on {ranks} ranks, above the {ideal:.3g}x they can give"


def surely_beyond(interval: list[float] | tuple[float, float], ideal: float) -> bool:
    """Whether a speedup's whole interval lies above the ideal (then the point is suspect, not only flagged)."""
    return interval[0] > ideal * (1 + 1e-9)


def noisy(report: dict) -> str | None:
    """``noisy: ...`` when the interval of the time per repeat is wider than +-BOUND of its median (under
    ``repeats: auto``, still wider after its budget, or below the 95% level), else None."""
    iv = time_interval(report)
    rule = report.get("repeat_rule") or {}
    auto = rule.get("rule") == "auto"
    if iv.n < 2 or iv.tight(BOUND, need_level=auto):
        return None
    after = f" after its {rule['max_seconds']:g} s budget" if auto and rule.get("stopped") == "budget" else ""
    # no level here: a sweep's findings state the levels once (advice.interval_note), each line alike; unless
    # the level itself is why (repeats: auto stopped by its budget before its repeats reached 95%)
    width = iv.relative_halfwidth()
    if width <= BOUND:
        return (
            f"noisy: {iv.n} repeats{after}, too few for a {LEVEL:.0%} interval of the time per repeat (within "
            f"+-{width:.0%} of its median at the level they reach; bound +-{BOUND:.0%})"
        )
    return (
        f"noisy: the interval of the time per repeat reaches +-{width:.0%} of its median over {iv.n} repeats{after} "
        f"(bound +-{BOUND:.0%})"
    )


def busy_host(report: dict) -> list[str]:
    """The run's busy-host reasons (report.json ``host.busy``, spmd.core.host); empty for a quiet host or a report
    written before spmd recorded the host."""
    return list((report.get("host") or {}).get("busy") or [])


def suspect_reasons(row: dict, placement: dict, report: dict) -> list[str]:
    """Short reasons a careful reader would doubt a series' run; empty when none. Sets ``row['flags']`` (beyond
    ideal, suspect or not)."""
    reasons = [
        f"oversubscribed: {host} ran {placement['ranks_per_node'][host]} ranks on "
        f"{placement['cpus_per_node'][host]} CPUs"
        for host in placement["oversubscribed"]
    ]
    reasons += busy_host(report)
    single = placement.get("single_cpu_gpu_ranks") or []
    if single:  # its launch-bound steps measure the CPU's contention as well (topology.single_cpu_gpu_ranks)
        reasons.append(f"one CPU per GPU rank: {len(single)} rank(s) bound to a single CPU by the launcher")
    ideal = row["speedup"] / row["efficiency"] if row["efficiency"] > 0 else row["ranks"]
    flag = beyond_ideal(row["speedup"], ideal, row["ranks"])
    row["flags"] = [flag] if flag else []
    if flag and surely_beyond(row.get("speedup_interval") or [row["speedup"]] * 2, ideal):
        reasons.append(flag + " (its whole interval too)")
    noise = noisy(report)
    if noise:
        reasons.append(noise)
    return reasons


def flag_batch_rows(rows: list[dict], n: int, reports: dict | None = None) -> None:
    """Each batch row's flags and suspect reasons: beyond ideal (above ``n``x), its whole interval above ``n``
    (suspect), and its two runs' busy hosts or noise (``reports``: batch -> (1-rank report, n-rank report))."""
    for r in rows:
        r.setdefault("suspect", [])
        flag = beyond_ideal(r["speedup"], n, n)
        r["flags"] = [flag] if flag else []
        for label, report in zip(("1 rank", f"{n} ranks"), (reports or {}).get(r["batch"], ())):
            r["suspect"] += [f"{label}: {why}" for why in busy_host(report)]
            noise = noisy(report)
            if noise:
                r["suspect"].append(f"{label}: {noise}")
        if flag and surely_beyond(r["speedup_interval"], n):
            r["suspect"].append(flag + f" (interval {r['speedup_interval'][0]:.2f}x-{r['speedup_interval'][1]:.2f}x)")


def miss(predicted: float, measured: float, interval: list[float] | tuple[float, float]) -> dict | None:
    """{'error', 'outside'} when ``predicted`` lies outside the measured ``interval`` and more than
    MODEL_TOLERANCE from ``measured`` (``outside``: how far beyond the interval's nearer end, relative to it);
    None otherwise."""
    low, high = interval
    error = predicted / measured - 1 if measured else 0.0
    if low <= predicted <= high or abs(error) <= MODEL_TOLERANCE:
        return None
    end = high if predicted > high else low
    return {"error": error, "outside": predicted / end - 1 if end else error}

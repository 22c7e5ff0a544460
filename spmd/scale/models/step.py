"""The model of a training step over the per-GPU batch (``spmd scale --batches``): T_1(b) = c0 + c1*b, the 1-rank
step fitted over the batches; T_N(b) = T_1(b) + max(0, K - phi*B(b)), K the gradients' allreduce per step at N
ranks and phi the share of backward B(b) = d0 + d1*b that hides it, both measured at each batch: from the captured
NCCL kernels (their transfer, and their overlap with compute kernels) where the runs captured steps
(``--capture``), else from what N ranks add to a step, T_N(b) - T_1(b), fitted as K - phi*B(b). K goes to other
rank counts by the sweep's alpha-beta fit on the gradient's bytes and buckets. It predicts the speedup at any b, the
break-even per-GPU batch, and what ``accumulate: k`` would give. Pure functions over a sweep's figures.
"""

from __future__ import annotations

import statistics

import numpy as np

ACCUMULATE = (2, 4)


def per_step(report: dict, *phases: str) -> float:
    """Seconds per step of ``phases`` together in a run (the slowest rank's median per repeat over its steps)."""
    steps = report["result"]["steps_per_repeat"]
    return sum(report["timings"].get(p, {"median": 0.0})["median"] for p in phases) / steps


def allreduce_seen(report: dict) -> tuple[float, float, str]:
    """(the allreduce's seconds per step, its exposed part, where they come from): the captured NCCL (or gloo)
    kernels' transfer and their overlap with compute where the run captured steps, else the marked steps."""
    k = report.get("kernels") or {}
    coll = k.get("collectives") or {}
    ranks = [r for r in k.get("per_rank") or [] if r.get("steps")]
    if coll.get("matched") and ranks and k.get("device") == "gpu":
        transfer = coll["transfer_us"] / 1e6
        overlap = statistics.median(r["overlap"] or 0.0 for r in ranks)
        return transfer, transfer * (1 - overlap), "captured kernels"
    shown = "comm_exposed" if "comm_exposed" in report["timings"] else "comm"  # torch's name, train's
    exposed = per_step(report, shown)
    return per_step(report, shown, "comm_overlapped"), exposed, "marked steps"


def _collective_wait(report: dict) -> float | None:
    """Seconds a captured step each rank waited in the collectives for the last one to arrive (median over ranks;
    None without matched collectives)."""
    coll = (report.get("kernels") or {}).get("collectives") or {}
    return statistics.median(coll["wait_us"]) / 1e6 if coll.get("matched") else None


def host_wait(report: dict) -> float | None:
    """Seconds of a timed step the GPU waited for its host to launch work (captured steps on a GPU; else None):
    the step less the device's own captured kernels (the profiler slows the host, not the kernels)."""
    k = report.get("kernels") or {}
    if not any(r.get("steps") and r.get("device") == "gpu" for r in k.get("per_rank") or []):
        return None
    return host_wait_timed(k, per_step(report, "total"))


def host_wait_timed(kernels: dict, step: float) -> float:
    """Seconds of a timed step the GPU waits for its host: the step less what the device did for itself in a
    captured step (its kernels, without the time it waited in collectives for a peer) and its short launch gaps
    (median over ranks). A captured step's own idle time would overstate it: the profiler slows the host (a
    captured step takes 2.5-3x a plain one), not the kernels."""
    waits = (kernels.get("collectives") or {}).get("wait_us") or []
    out = []
    for r in kernels["per_rank"]:
        if not r.get("steps"):
            continue
        m = r["median"]
        wait = waits[r["rank"]] if r["rank"] < len(waits) else 0.0
        own = (m["busy_us"] - wait + m["idle"]["launch"]) / 1e6
        out.append(max(0.0, step - own))
    return sorted(out)[len(out) // 2] if out else 0.0


def fit(rows: list[dict], n: int, every: list[dict] | None = None) -> dict:
    """The step model's coefficients from ``rows`` (the points it rests on), its prediction and error at every
    measured batch (``every``: the suspect ones too), and the terms it had to clamp."""
    b = np.array([r["batch"] for r in rows], dtype=float)
    c1, c0 = np.polyfit(b, [r["step_s_1"] for r in rows], 1)
    d1, d0 = np.polyfit(b, [r["backward_s_n"] for r in rows], 1)
    clamped = [name for name, v in (("c0", c0), ("c1", c1)) if v <= 0]
    if all(r.get("comm_source") == "captured kernels" for r in rows):  # seen: the NCCL kernels and their overlap
        source = "captured kernels"
        comm = statistics.median(r["comm_s_n"] for r in rows)
        hidden = [(r["comm_s_n"] - r["exposed_s_n"]) / r["backward_s_n"] for r in rows if r["backward_s_n"] > 0]
        phi = float(np.clip(statistics.median(hidden), 0.0, 1.0)) if hidden else 0.0
    else:  # no capture: what N ranks add to a step, T_N - T_1 (the marked steps' allreduce hides less than DDP's)
        source = "step times"
        comm, phi = exposed_fit([r["step_s_n"] - r["step_s_1"] for r in rows], [r["backward_s_n"] for r in rows])
        if comm <= 0:
            clamped.append("K")
    model = {
        "c0_s": max(float(c0), 0.0),
        "c1_s": max(float(c1), 1e-12),
        "d0_s": max(float(d0), 0.0),
        "d1_s": max(float(d1), 0.0),
        "comm_s": comm,
        "comm_timed_s": statistics.median(r["comm_s_n"] for r in rows),
        "comm_source": source,
        "hidden_share": phi,
        "ranks": n,
        "fitted_batches": [r["batch"] for r in rows],
        "clamped": clamped,
    }
    model["points"] = [
        {
            "batch": r["batch"],
            "measured_speedup": r["speedup"],
            "measured_interval": r.get("speedup_interval") or [r["speedup"]] * 2,
            "predicted_speedup": speedup(model, r["batch"]),
            "error": speedup(model, r["batch"]) / r["speedup"] - 1,
            "fitted": r in rows,
            "wait_s_n": r.get("wait_s_n"),
        }
        for r in every or rows
    ]
    model["break_even_batch"] = break_even(model)
    return model


def exposed_fit(added: list[float], backward: list[float]) -> tuple[float, float]:
    """(K, phi) of added = K - phi * backward, least squares over the measured batches, phi within [0, 1] and K
    at least 0: what N ranks add to a step (``added``: T_N - T_1) as an allreduce of K seconds of which a share
    phi of backward hides. With one backward time (or none varying), phi is 0 and K the mean."""
    x, y = np.asarray(backward, dtype=float), np.asarray(added, dtype=float)
    phi = 0.0
    if len(x) > 1 and float(np.ptp(x)) > 0:
        phi = float(np.clip(-np.polyfit(x, y, 1)[0], 0.0, 1.0))
    return max(float(np.mean(y + phi * x)), 0.0), phi


def _alpha_beta(comm_model: dict | None, result: dict) -> dict | None:
    """The gradient's allreduce as alpha-beta terms: per step, buckets x alpha + 2(n-1)/n x bytes / busbw."""
    if not comm_model or not comm_model.get("busbw_Bps") or not result.get("gradient_bytes"):
        return None
    return {
        "alpha_s": comm_model["alpha_s"],
        "busbw_Bps": comm_model["busbw_Bps"],
        "buckets": max(1, len(result.get("buckets") or [])),
        "bytes": result["gradient_bytes"],
    }


def allreduce_time(model: dict, ranks: int) -> float:
    """The allreduce per step at ``ranks``: measured at the sweep's rank count, carried to others by the
    alpha-beta terms (unchanged where there are none)."""
    n, ab = model["ranks"], model.get("alpha_beta")
    if ranks == n or not ab:
        return model["comm_s"]

    def terms(k: int) -> float:
        return ab["buckets"] * ab["alpha_s"] * 2 * (k - 1) + 2 * (k - 1) / k * ab["bytes"] / ab["busbw_Bps"]

    return model["comm_s"] * terms(ranks) / terms(n) if terms(n) > 0 else model["comm_s"]


def step_time(model: dict, batch: float, ranks: int, accumulate: int = 1, fixed: float | None = None) -> float:
    """Predicted seconds per optimizer step (``fixed``: the per-step cost that does not grow with the batch)."""
    c0 = model["c0_s"] if fixed is None else fixed
    own = accumulate * (c0 + model["c1_s"] * batch)
    if ranks == 1:
        return own
    backward = model["d0_s"] + model["d1_s"] * batch
    return own + max(0.0, allreduce_time(model, ranks) - model["hidden_share"] * backward)


def speedup(
    model: dict, batch: float, accumulate: int = 1, fixed: float | None = None, ranks: int | None = None
) -> float:
    """``ranks`` (default: the sweep's most) ranks' samples/s over one rank's, both at per-GPU ``batch``."""
    n = ranks or model["ranks"]
    return n * step_time(model, batch, 1, accumulate, fixed) / step_time(model, batch, n, accumulate, fixed)


def break_even(model: dict) -> int | None:
    """The smallest per-GPU batch at which N ranks beat one (None: none up to MAX_BATCH)."""
    return smallest_batch(lambda b: speedup(model, b) >= 1)


MAX_BATCH = 1 << 20


def smallest_batch(faster) -> int | None:
    """The smallest per-GPU batch b with ``faster(b)`` (None: none up to MAX_BATCH), for a ``faster`` that once true
    stays true as the batch grows: doubling, then bisection. The one search of every batch break-even."""
    if faster(1):
        return 1
    hi = 2
    while not faster(hi):
        hi *= 2
        if hi > MAX_BATCH:
            return None
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if faster(mid) else (mid, hi)
    return hi

"""The batch sweep (``spmd scale --batches``): for each per-GPU batch, one GPU against N, and a model of a
training step that says where N GPUs pay off.

The study's table: per-GPU batch b x {1 rank, N ranks}: samples/s and the speedup N*b/T_N(b) / (b/T_1(b)).
The model splits a step: T_1(b) = c0 + c1*b (the step's own work, fitted over the 1-rank runs);
T_N(b) = T_1(b) + max(0, K - phi*B(b)): B(b) = d0 + d1*b the backward time at N ranks, K the allreduce's cost per
step at N ranks and phi the share of backward that hides it (carried to other rank counts by the sweep's
alpha-beta fit on the gradient's bytes and buckets). K and phi are fitted to what N ranks add to a step,
T_N(b) - T_1(b), measured: the allreduce timed on its own (the phases' comm, on the steps that carry timing marks)
runs as if nothing hid it, while unmarked steps overlap it with backward, so the timed allreduce is reported beside
the fit, not used as K (on 2 H200s it charged a step 0.4-1.1 ms that the step times showed hidden, and the
prediction missed by 15-40%). It predicts the speedup at any b, the break-even per-GPU batch, and what each change
would give: a bigger batch, ``accumulate: k`` (k micro-batches per allreduce), and ``ddp-graph`` (at most c0, the
per-step cost that does not grow with the batch, saved).
"""

from __future__ import annotations

import statistics

import numpy as np

from ..core.stats import ratio_interval
from ..core.units import fmt_seconds
from .series import time_interval

ACCUMULATE = (2, 4)


def batch_sweep(runs: list[dict], comm_model: dict | None = None) -> dict | None:
    """{'ranks', 'rows', 'model', 'advice'} from the sweep's runs of mode 'batch' (None when there are none);
    ``comm_model`` (the sweep's alpha-beta fit: alpha_s, busbw_Bps) carries the allreduce to other rank counts."""
    if not runs:
        return None
    n = max(r["ranks"] for r in runs)
    by = {(r["ranks"], r["report"]["result"]["batch_per_rank"]): r["report"] for r in runs}
    batches = sorted({b for _, b in by})
    rows = []
    for b in batches:
        one, many = by.get((1, b)), by.get((n, b))
        if one is None or many is None:
            continue
        s1, sn = one["metrics"]["samples_per_s"], many["metrics"]["samples_per_s"]
        low, high = ratio_interval(time_interval(one), time_interval(many))  # samples/s go as 1 / time
        rows.append(
            {
                "batch": b,
                "samples_per_s_1": s1,
                "samples_per_s_n": sn,
                "speedup": sn / s1,
                "speedup_interval": [n * low, n * high],
                "step_s_1": _per_step(one, "total"),
                "step_s_n": _per_step(many, "total"),
                "comm_s_n": _per_step(many, "comm_exposed") + _per_step(many, "comm_overlapped"),
                "exposed_s_n": _per_step(many, "comm_exposed"),
                "backward_s_n": _per_step(many, "backward") + _per_step(many, "comm_overlapped"),
                "verified": bool(one["verified"] and many["verified"]),
            }
        )
    first = runs[0]["report"]["result"]
    model = fit(rows, n) if len(rows) >= 2 else None
    if model is not None:
        model["alpha_beta"] = _alpha_beta(comm_model, first)
        model["next_ranks"] = 2 * n
        for point in model["points"]:
            point["predicted_speedup_next"] = speedup(model, point["batch"], ranks=2 * n)
    return {
        "ranks": n,
        "rows": rows,
        "model": model,
        "gradient_bytes": first.get("gradient_bytes"),
        "buckets": len(first.get("buckets") or []),
        "advice": advice(rows, model, n, first),
    }


def _per_step(report: dict, phase: str) -> float:
    steps = report["result"]["steps_per_repeat"]
    return report["timings"].get(phase, {"median": 0.0})["median"] / steps


def fit(rows: list[dict], n: int) -> dict:
    """The step model's coefficients, and its prediction and error at every measured batch."""
    b = np.array([r["batch"] for r in rows], dtype=float)
    c1, c0 = np.polyfit(b, [r["step_s_1"] for r in rows], 1)
    d1, d0 = np.polyfit(b, [r["backward_s_n"] for r in rows], 1)
    comm, phi = exposed_fit([r["step_s_n"] - r["step_s_1"] for r in rows], [r["backward_s_n"] for r in rows])
    model = {
        "c0_s": max(float(c0), 0.0),
        "c1_s": max(float(c1), 1e-12),
        "d0_s": max(float(d0), 0.0),
        "d1_s": max(float(d1), 0.0),
        "comm_s": comm,
        "comm_timed_s": statistics.median(r["comm_s_n"] for r in rows),
        "hidden_share": phi,
        "ranks": n,
    }
    model["points"] = [
        {
            "batch": r["batch"],
            "measured_speedup": r["speedup"],
            "predicted_speedup": speedup(model, r["batch"]),
            "error": speedup(model, r["batch"]) / r["speedup"] - 1,
        }
        for r in rows
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
    """The smallest per-GPU batch at which N ranks beat one (None: none up to 2^20)."""
    lo = 1
    if speedup(model, lo) >= 1:
        return lo
    hi = 2
    while speedup(model, hi) < 1:
        hi *= 2
        if hi > 2**20:
            return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if speedup(model, mid) >= 1 else (mid, hi)
    return hi


def advice(rows: list[dict], model: dict | None, n: int, result: dict) -> list[str]:
    """What the table says, and what each change is predicted to give (the next run measures it)."""
    if not rows:
        return []
    out = []
    # a conclusion only where the interval supports it: slower when even its top is below 1
    slow = [r for r in rows if r["speedup_interval"][1] < 1]
    unsure = [r for r in rows if r["speedup_interval"][0] <= 1 <= r["speedup_interval"][1]]
    table = ", ".join(
        f"batch {r['batch']}: {r['speedup']:.2f}x ({r['speedup_interval'][0]:.2f}-{r['speedup_interval'][1]:.2f})"
        for r in rows
    )
    out.append(
        f"batch sweep, {n} ranks against 1 at the same per-GPU batch (interval from both runs' repeats): "
        f"{table}"
        + (f"; {n} ranks are SLOWER than one at batch {', '.join(str(r['batch']) for r in slow)}" if slow else "")
        + (
            f"; no measurable difference from one rank at batch {', '.join(str(r['batch']) for r in unsure)}"
            if unsure
            else ""
        )
    )
    if model is None:
        return out + ["batch sweep: two batches or more are needed to fit the step model"]
    worst = max(abs(p["error"]) for p in model["points"])
    out.append(
        f"step model: T1 = {fmt_seconds(model['c0_s'])} + {fmt_seconds(model['c1_s'])} x batch; {n} ranks add "
        f"{fmt_seconds(model['comm_s'])} of allreduce per step, {model['hidden_share']:.0%} of backward hiding it "
        f"(fitted on the step times; the allreduce timed on its own: {fmt_seconds(model['comm_timed_s'])} per "
        f"step); error at the measured batches at most {worst:.0%}"
    )
    even = model["break_even_batch"]
    out.append(
        f"break-even: {n} GPUs beat one from a per-GPU batch of {even} (predicted)"
        if even
        else f"break-even: no per-GPU batch up to 2^20 makes {n} GPUs beat one (predicted)"
    )
    nxt = model["next_ranks"]
    out.append(
        f"at {nxt} ranks (allreduce carried by {'the alpha-beta fit' if model.get('alpha_beta') else 'no fit: unchanged'}"
        f"): " + ", ".join(f"batch {p['batch']}: {p['predicted_speedup_next']:.2f}x" for p in model["points"])
    )
    top = rows[-1]["batch"]
    out.append(
        f"bigger batch: per-GPU batch {2 * top} is predicted at {speedup(model, 2 * top):.2f}x, {4 * top} at "
        f"{speedup(model, 4 * top):.2f}x (measured {rows[-1]['speedup']:.2f}x at {top})"
    )
    accumulate = ", ".join(f"accumulate: {k} -> {speedup(model, top, k):.2f}x" for k in ACCUMULATE)
    out.append(
        f"fewer allreduces: at batch {top}, {accumulate} (one allreduce per {ACCUMULATE[0]} or "
        f"{ACCUMULATE[-1]} micro-batches)"
    )
    if result.get("strategy") != "ddp-graph":
        out.append(
            f"launch overhead: {fmt_seconds(model['c0_s'])} per step does not grow with the batch; "
            f"strategy: ddp-graph (GPUs) replays the step in one launch: were all of it gone on every rank, "
            f"{speedup(model, top, fixed=0.0):.2f}x at batch {top} (faster steps, but the allreduce weighs more)"
        )
    if result.get("gradient_bytes"):
        out.append(
            f"buckets: {result['gradient_bytes'] / 2**20:.1f} MiB of gradients in {len(result.get('buckets') or [])}"
            f" bucket(s) (bucket_mb {result.get('bucket_mb', '?')}); smaller buckets start the allreduce earlier "
            f"in backward, larger ones pay its latency fewer times"
        )
    return out

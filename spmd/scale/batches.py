"""The batch sweep (``spmd scale --batches``): for each per-GPU batch, one GPU against N, and a model of a
training step that says where N GPUs pay off.

The study's table: per-GPU batch b x {1 rank, N ranks}: samples/s and the speedup N*b/T_N(b) / (b/T_1(b)), with
its interval. A point far outside what scaling allows (more than SUPERLINEAR x N with its whole interval above N:
a 1-rank run slowed by something else) is flagged and kept out of the fit.

The model rests on what was seen, never on differences of step times: T_1(b) = c0 + c1*b, the 1-rank step fitted
over the batches; T_N(b) = T_1(b) + max(0, K - phi*B(b)), K the gradients' allreduce per step at N ranks and phi
the share of backward B(b) = d0 + d1*b that hides it, both measured at each batch: from the captured NCCL kernels
(their transfer, and their overlap with compute kernels) where the runs captured steps (``--capture``), else from
what N ranks add to a step, T_N(b) - T_1(b), fitted as K - phi*B(b) (the marked steps' own allreduce spans
hide less than plain DDP's: on 2 H200s they charged a step 0.4-1.1 ms the step times showed hidden), said as
such with the run that would ground it. K goes to other rank counts by the sweep's alpha-beta fit on the gradient's bytes and
buckets. The host's part: where the 1-rank run captured steps, the time its GPU sat idle waiting for launches, what
CUDA graphs (``ddp-graph``) remove and a bigger batch amortises. It predicts the speedup at any b, the
break-even per-GPU batch, and what a bigger batch, ``accumulate: k`` and ``ddp-graph`` would give.
"""

from __future__ import annotations

import statistics

import numpy as np

from ..core.stats import ratio_interval
from ..core.units import fmt_seconds
from .series import time_interval

ACCUMULATE = (2, 4)
SUPERLINEAR = 1.25  # a speedup above this times the rank count, its interval above the count: a suspect point


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
        allreduce, exposed, source = allreduce_seen(many)
        rows.append(
            {
                "batch": b,
                "samples_per_s_1": s1,
                "samples_per_s_n": sn,
                "speedup": sn / s1,
                "speedup_interval": [n * low, n * high],
                "step_s_1": per_step(one, "total"),
                "step_s_n": per_step(many, "total"),
                "comm_s_n": allreduce,
                "exposed_s_n": exposed,
                "comm_source": source,
                "backward_s_n": per_step(many, "backward", "comm_overlapped"),
                "host_s_1": host_wait(one),
                "wait_s_n": _collective_wait(many),
                "verified": bool(one["verified"] and many["verified"]),
                "suspect": [],
            }
        )
    flag_suspects(rows, n)
    first = runs[0]["report"]["result"]
    good = [r for r in rows if not r["suspect"]]
    model = fit(good, n, rows) if len(good) >= 2 else None
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
        "advice": advice(rows, model, n, {**first, "device": runs[0]["report"]["device"]}),
    }


def flag_suspects(rows: list[dict], n: int) -> None:
    """Mark each row whose speedup lies beyond what ``n`` ranks can give (above SUPERLINEAR x n, its whole
    interval above n: its 1-rank run was slowed by something else), with the run that would settle it."""
    for r in rows:
        r.setdefault("suspect", [])
        if r["speedup"] > SUPERLINEAR * n and r["speedup_interval"][0] > n:
            r["suspect"].append(
                f"{r['speedup']:.1f}x on {n} ranks is beyond what {n} ranks can give (interval "
                f"{r['speedup_interval'][0]:.1f}x-{r['speedup_interval'][1]:.1f}x): its 1-rank run took "
                f"{fmt_seconds(r['step_s_1']).strip()} a step; rerun batch {r['batch']} on 1 rank to settle it"
            )


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
    """What the table says, in the job's terms (per-GPU batch, samples/s, gradient bytes, steps), and what each
    change is predicted to give (the next run measures it); every prediction with what it rests on."""
    if not rows:
        return []
    units, one = unit_words(result)
    out = []
    # a conclusion only where the interval supports it: slower when even its top is below 1
    slow = [r for r in rows if r["speedup_interval"][1] < 1 and not r.get("suspect")]
    unsure = [r for r in rows if r["speedup_interval"][0] <= 1 <= r["speedup_interval"][1] and not r.get("suspect")]
    table = ", ".join(
        f"batch {r['batch']}: {r['speedup']:.2f}x ({r['speedup_interval'][0]:.2f}-{r['speedup_interval'][1]:.2f})"
        + (" SUSPECT" if r.get("suspect") else "")
        for r in rows
    )
    out.append(
        f"batch sweep, samples/s of {n} {units} over {one}'s at the same per-{units[:-1]} batch (interval from both runs' "
        f"repeats): {table}"
        + (f"; {n} {units} are SLOWER than one at batch {', '.join(str(r['batch']) for r in slow)}" if slow else "")
        + (
            f"; no measurable difference from {one} at batch {', '.join(str(r['batch']) for r in unsure)}"
            if unsure
            else ""
        )
    )
    out += [
        f"suspect point, kept out of the step model: batch {r['batch']}: {why}"
        for r in rows
        for why in r.get("suspect") or []
    ]
    if model is None:
        return out + ["batch sweep: two trustworthy batches or more are needed to fit the step model"]
    out.append(model_sentence(model, n, result))
    out.append(pay_off_sentence(rows, model, n, result))
    nxt = model["next_ranks"]
    if "K" in model["clamped"]:
        out.append(
            f"at {nxt} {units}: not predicted, the model holds no allreduce cost to carry there (its term was clamped at 0: "
            f"{n} {units} added nothing measurable to a step); a run with --capture measures the allreduce's kernels"
        )
    else:
        out.append(
            f"at {nxt} {units} (predicted; the allreduce carried by "
            f"{'the alpha-beta fit of the sweep' if model.get('alpha_beta') else 'nothing: taken as unchanged'}): "
            + ", ".join(
                f"batch {p['batch']}: {_x(p['predicted_speedup_next'])} {one}'s samples/s"
                for p in model["points"]
                if p["fitted"]
            )
        )
    top = max(p["batch"] for p in model["points"] if p["fitted"])
    measured = next(r for r in rows if r["batch"] == top)
    out.append(
        f"bigger batch: per-{units[:-1]} batch {2 * top} is predicted at {_x(speedup(model, 2 * top))}, {4 * top} at "
        f"{_x(speedup(model, 4 * top))} (measured {measured['speedup']:.2f}x at {top})"
    )
    accumulate = ", ".join(f"accumulate: {k} -> {_x(speedup(model, top, k))}" for k in ACCUMULATE)
    out.append(
        f"fewer allreduces: at batch {top}, {accumulate} (one allreduce per {ACCUMULATE[0]} or "
        f"{ACCUMULATE[-1]} micro-batches)"
    )
    out.append(host_sentence(rows, model, n, top, result))
    if result.get("gradient_bytes"):
        out.append(
            f"buckets: {result['gradient_bytes'] / 2**20:.1f} MiB of gradients in {len(result.get('buckets') or [])}"
            f" bucket(s) (bucket_mb {result.get('bucket_mb', '?')}); smaller buckets start the allreduce earlier "
            f"in backward, larger ones pay its latency fewer times"
        )
    return out


def _x(value: float) -> str:
    """A predicted ratio: two significant figures (a model's 8.00x would claim more than it knows)."""
    return f"{value:.2g}x"


def unit_words(result: dict) -> tuple[str, str]:
    """What N of the job's ranks are called, and one of them: GPUs on a GPU, ranks on a CPU."""
    return ("GPUs", "one GPU") if result.get("device") == "gpu" else ("ranks", "one rank")


def model_sentence(model: dict, n: int, result: dict) -> str:
    """The step model, what each term rests on, the terms clamped, and its error at each measured batch."""
    units, _ = unit_words(result)
    grounded = (
        f"{fmt_seconds(model['comm_s']).strip()} of allreduce per step, {model['hidden_share']:.0%} of "
        f"backward hiding it (from the captured NCCL kernels: their transfer, and their overlap with compute)"
        if model["comm_source"] == "captured kernels"
        else f"{fmt_seconds(model['comm_s']).strip()} of allreduce per step, {model['hidden_share']:.0%} of "
        f"backward hiding it (fitted on what {n} {units} add to a step: no captured kernels; the allreduce timed on "
        f"the marked steps: {fmt_seconds(model['comm_timed_s']).strip()} per step; --capture grounds it)"
    )
    fitted = model["fitted_batches"]
    points = "; ".join(
        f"batch {p['batch']}: {p['predicted_speedup']:.2f}x predicted, {p['measured_speedup']:.2f}x measured "
        f"({p['measured_interval'][0]:.2f}-{p['measured_interval'][1]:.2f}): "
        + (
            "within 10%"
            if abs(p["error"]) <= 0.1
            else "not decided (the interval is wider than 10%)"
            if p["measured_interval"][1] / max(p["measured_interval"][0], 1e-12) > 1.2
            else f"off by {p['error']:+.0%}" + _why_off(p, model)
        )
        + ("" if p["fitted"] else ", not fitted (suspect)")
        for p in model["points"]
    )
    clamped = [t for t in model["clamped"] if t in ("c0", "c1")]
    out = (
        f"step model: 1 rank: T1 = {fmt_seconds(model['c0_s']).strip()} + {fmt_seconds(model['c1_s']).strip()} x "
        f"batch (over batches {', '.join(map(str, fitted))}); {n} {units} add {grounded}. {points}"
    )
    if len(fitted) == 2:
        out += "; fitted on 2 batches, T1 meets them by construction: a third batch would test it"
    if clamped:
        out += (
            f"; {' and '.join(clamped)} came out at or below 0 and was clamped (the 1-rank step times do not grow "
            f"with the batch as a step's work does: rerun the 1-rank points, or more repeats)"
        )
    return out


def _why_off(point: dict, model: dict) -> str:
    """Why a prediction above the measurement missed, where the captured kernels show it: the ranks waiting for
    each other in the collectives (each step the slowest host's), which the model does not hold."""
    wait = point.get("wait_s_n")
    if point["error"] <= 0 or not wait or wait <= model["comm_s"]:
        return ""
    return (
        f" (in the captured steps the ranks waited {fmt_seconds(wait).strip()} a step in the collectives for the last "
        f"to arrive, more than the allreduce's {fmt_seconds(model['comm_s']).strip()}: each step waits for the "
        f"slowest host, a term the model does not hold)"
    )


def pay_off_sentence(rows: list[dict], model: dict, n: int, result: dict) -> str:
    """Where N GPUs pay off: measured (the smallest trustworthy batch whose interval lies above 1x), and
    predicted, in one sentence that cannot contradict itself."""
    units, one = unit_words(result)
    good = [r for r in rows if not r.get("suspect")]
    paid = [r["batch"] for r in good if r["speedup_interval"][0] > 1]
    even = model["break_even_batch"]
    measured = (
        f"measured: from per-{units[:-1]} batch {min(paid)} ({n} {units} above {one}'s samples/s)"
        if paid
        else f"measured: at no batch of {', '.join(str(r['batch']) for r in good)}"
    )
    predicted = (
        f"predicted from per-{units[:-1]} batch {even}"
        if even
        else f"predicted at no per-{units[:-1]} batch up to 2^20 (the allreduce outweighs what {n} {units} save)"
    )
    if even and paid and even > max(paid):
        predicted += f" (the measurement at {min(paid)} says earlier: the model is off there)"
    return f"{n} {units} pay off {measured}; {predicted}"


def host_sentence(rows: list[dict], model: dict, n: int, top: int, result: dict) -> str:
    """The host's part of a step: measured where the 1-rank runs captured kernels, and what removing it gives."""
    row = next(r for r in rows if r["batch"] == top)
    host = row.get("host_s_1")
    units, _ = unit_words(result)
    if result.get("device") != "gpu":
        return (
            f"host: {fmt_seconds(model['c0_s']).strip()} of a 1-rank step does not grow with the batch (Python, the "
            f"framework, the optimizer's loop: what a bigger batch amortises); on a CPU the host is the device, so "
            f"no part of it is a device waiting for launches"
        )
    if host is None:
        return (
            f"host: {fmt_seconds(model['c0_s']).strip()} of a 1-rank step does not grow with the batch (launches, "
            f"Python, the optimizer's loop: what a bigger batch amortises); --capture measures how much of it the GPU "
            f"waits for its host, what CUDA graphs (strategy: ddp-graph) would remove"
        )
    t1 = step_time(model, top, 1)
    tn = step_time(model, top, n)
    gone = max(tn - host, 1e-9)
    if result.get("strategy") == "ddp-graph":
        return (
            f"host: at batch {top} a 1-rank step's GPU waited {fmt_seconds(host).strip()} for its host "
            f"({host / t1:.0%} of the step) under ddp-graph (captured)"
        )
    return (
        f"host: at batch {top} a 1-rank step's GPU sat idle {fmt_seconds(host).strip()} waiting for its host to launch "
        f"work ({host / t1:.0%} of the step; captured); CUDA graphs (strategy: ddp-graph) remove launch gaps: "
        f"with all of it gone {n} {units} would give about {n * top / gone:,.0f} samples/s against "
        f"{n * top / tn:,.0f} predicted now"
    )

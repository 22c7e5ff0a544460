"""The batch sweep's findings in the job's terms (per-GPU batch, samples/s, gradient bytes, steps), rendered from
its table and step model: every prediction with what it rests on."""

from __future__ import annotations

from ...core.units import fmt_seconds
from ..models.step import ACCUMULATE, speedup, step_time
from .decide import pay_off
from .flags import miss
from .verdict import pay_off_text


def advice(rows: list[dict], model: dict | None, n: int, result: dict, decision: dict | None = None) -> list[str]:
    """What the table says, in the job's terms (per-GPU batch, samples/s, gradient bytes, steps), and what each
    change is predicted to give (the next run measures it); every prediction with what it rests on, and none from
    a model that misses its own points (``decision``: the sweep's, decision.decide)."""
    if not rows:
        return []
    units, one = unit_words(result)
    out = []
    # a conclusion only where the interval supports it: slower when even its top is below 1
    slow = [r for r in rows if r["speedup_interval"][1] < 1 and not r.get("suspect")]
    unsure = [r for r in rows if r["speedup_interval"][0] <= 1 <= r["speedup_interval"][1] and not r.get("suspect")]
    table = ", ".join(
        f"batch {r['batch']}: {r['speedup']:.2f}x ({r['speedup_interval'][0]:.2f}-{r['speedup_interval'][1]:.2f})"
        + (" BEYOND IDEAL" if r.get("flags") else "")
        + (" SUSPECT" if r.get("suspect") else "")
        for r in rows
    )
    out.append(
        f"batch sweep, samples/s of {n} {units} over {one}'s at the same per-{units[:-1]} batch (interval from both "
        f"runs' repeats): {table}"
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
    captured = bool((decision or {}).get("captured_batch"))
    out.append(model_sentence(model, n, result, captured))
    state = (decision or {}).get("batch_model") or {"trusted": True}
    if not state["trusted"]:
        return out + [
            f"the step model misses its own points: it predicts nothing further (no break-even, no {2 * n} "
            f"{units}, no bigger batch); more repeats of the missed batches, or --capture on a GPU, would ground it"
        ]
    out.append(pay_off_sentence(rows, model, n, result, state if decision else None))
    nxt = model["next_ranks"]
    if "K" in model["clamped"]:
        out.append(
            f"at {nxt} {units}: not predicted, the model holds no allreduce cost to carry there (its term was clamped "
            f"at 0: {n} {units} added nothing measurable to a step); a run with --capture measures the allreduce's "
            f"kernels"
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


def model_sentence(model: dict, n: int, result: dict, captured: bool = False) -> str:
    """The step model, what each term rests on, the terms clamped, and its error at each measured batch: within its
    interval, within 10%, or a miss with its size (flags.miss)."""
    units, _ = unit_words(result)
    if model["comm_source"] == "captured kernels":
        grounded = (
            f"{fmt_seconds(model['comm_s']).strip()} of allreduce per step, {model['hidden_share']:.0%} of "
            f"backward hiding it (from the captured NCCL kernels: their transfer, and their overlap with compute)"
        )
    else:
        ground = (
            "the captured steps hold no NCCL kernels to ground it (a CPU's collectives are gloo's operators)"
            if captured
            else "--capture on GPUs grounds it"
        )
        grounded = (
            f"{fmt_seconds(model['comm_s']).strip()} of allreduce per step, {model['hidden_share']:.0%} of "
            f"backward hiding it (fitted on what {n} {units} add to a step: no captured kernels; the allreduce timed "
            f"on the marked steps: {fmt_seconds(model['comm_timed_s']).strip()} per step; {ground})"
        )
    fitted = model["fitted_batches"]
    points = "; ".join(
        f"batch {p['batch']}: {p['predicted_speedup']:.2f}x predicted, {p['measured_speedup']:.2f}x measured "
        f"({p['measured_interval'][0]:.2f}-{p['measured_interval'][1]:.2f}): "
        + _fit_words(p, model)
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


def _fit_words(point: dict, model: dict) -> str:
    """A model point in words: inside the measured interval, within 10%, or a miss with its size."""
    low, high = point["measured_interval"]
    if low <= point["predicted_speedup"] <= high:
        return "within its interval"
    found = miss(point["predicted_speedup"], point["measured_speedup"], point["measured_interval"])
    if found is None:
        return f"within 10% ({point['error']:+.0%})"
    side = "above its top" if found["outside"] > 0 else "below its bottom"
    return f"a miss: {found['error']:+.0%} ({abs(found['outside']):.0%} {side})" + _why_off(point, model)


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


def pay_off_sentence(rows: list[dict], model: dict, n: int, result: dict, state: dict | None = None) -> str:
    """Where N GPUs pay off, by the decision's rule (decide.pay_off) in the verdict's words (``state``: the step
    model's trust, decide's ``batch_model``; a fitted model taken as meeting its points where not given)."""
    state = state or {"fitted": True, "trusted": True, "misses": []}
    return pay_off_text(pay_off({"rows": rows, "model": model}, state), state, unit_words(result)[0], n)


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

"""The batch sweep's table (``spmd scale --batches``): for each per-GPU batch, one GPU against N, samples/s and the
speedup N*b/T_N(b) / (b/T_1(b)) with its interval; its points flagged (decision.flags), the step model
(models.step) fitted on the trustworthy ones, and the findings (decision.batch_words)."""

from __future__ import annotations

from ...core.stats import ratio_interval
from ..decision.flags import flag_batch_rows
from ..models.series import time_interval
from ..models.step import _alpha_beta, _collective_wait, allreduce_seen, fit, host_wait, per_step, speedup


def batch_sweep(runs: list[dict], comm_model: dict | None = None) -> dict | None:
    """{'ranks', 'rows', 'model', 'captured', ...} from the sweep's runs of mode 'batch' (None when there are none;
    its words come after the decision: decision.batch_words);
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
    flag_batch_rows(rows, n, {b: (by[(1, b)], by[(n, b)]) for b in batches if (1, b) in by and (n, b) in by})
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
        "captured": any(r["report"].get("kernels") for r in runs),
        "result": {**first, "device": runs[0]["report"]["device"]},
    }

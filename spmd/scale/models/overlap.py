"""A training step's gradient allreduce against its backward, as DDP runs it: each bucket's allreduce may start once
backward has handed the bucket over, and the buckets' allreduces run one after another; what is left when
backward ends is exposed.

The sweep measures when each bucket was handed over (the marked steps' allreduce spans start there, on the
compute stream's clock) as a share of backward, from the first gradient bucket to the last; a target's step then
runs the same backward with its own allreduce of each bucket (``exposed``). Where the sweep kept no such marks
(spmd's own train workload, or reports without a timeline), the share of backward that the sweep saw hide the
allreduce (``phi``) stands in: a lower bound of what can hide where the sweep's allreduce hid whole."""

from __future__ import annotations

import statistics

from .step import allreduce_seen


def hidden_share(scaling: dict) -> dict:
    """{'phi', 'runs', and where the sweep marked them 'handed_over'}: the share of backward that hid the gradients'
    allreduce in the sweep's runs of several ranks (median over them; 0 where none had several ranks), and each
    bucket's hand-over as a share of backward (median over every marked step of every run)."""
    shares = []
    for run in scaling["runs"]:
        report = run["report"]
        if run["ranks"] < 2 or "backward" not in report["timings"]:
            continue
        steps = report["result"].get("steps_per_repeat") or 1
        allreduce, exposed, _ = allreduce_seen(report)
        backward = report["timings"]["backward"]["median"] / steps
        if backward > 0:
            shares.append(min(1.0, max(0.0, (allreduce - exposed) / backward)))
    out = {"phi": statistics.median(shares) if shares else 0.0, "runs": len(shares)}
    handed = handed_over(scaling)
    if handed:
        out["handed_over"] = handed
    return out


def handed_over(scaling: dict) -> list[float] | None:
    """Each gradient bucket's hand-over in a step, in DDP's order, as a share of backward (0 at its start, 1 at the
    last bucket's). Each is the median over the marked steps of the sweep's runs; None where none marked as many
    allreduces as the runs have buckets."""
    per_bucket: list[list[float]] = []
    for run in scaling["runs"]:
        report = run["report"]
        buckets = (report.get("result") or {}).get("buckets") or []
        for rank in (report.get("timeline") or {}).get("per_rank") or []:
            for repeat in rank:
                if repeat.get("warmup"):
                    continue
                shares = _shares(repeat.get("spans") or [], len(buckets))
                if shares is None:
                    continue
                per_bucket = per_bucket or [[] for _ in shares]
                if len(shares) == len(per_bucket):
                    for seen, share in zip(per_bucket, shares):
                        seen.append(share)
    return [statistics.median(seen) for seen in per_bucket] if per_bucket else None


def _shares(spans: list, buckets: int) -> list[float] | None:
    """A marked step's hand-overs as shares of its last backward (None unless it marked ``buckets`` allreduces)."""
    backward = [s for s in spans if s[0] == "backward"]
    starts = sorted(s[2] for s in spans if s[0] == "allreduce")
    if not buckets or not backward or len(starts) != buckets:
        return None
    begin = backward[-1][2]
    length = starts[-1] - begin
    if length <= 0:
        return None
    return [min(1.0, max(0.0, (a - begin) / length)) for a in starts]


def exposed(handed: list[float], costs: list[float], backward: float) -> float:
    """Seconds of a step's allreduce left after ``backward`` ends: bucket j handed over at ``handed[j] x backward``,
    its allreduce taking ``costs[j]`` after the one before it."""
    end = 0.0
    for share, cost in zip(handed, costs):
        end = max(end, share * backward) + cost
    return max(0.0, end - backward)

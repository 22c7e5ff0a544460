"""A sweep's launch has a history: its sizes run one after another on the first ranks, so at a size the ranks new
to the launch have not run what the others ran. Where they are the slow ones, the finding names that history."""

from __future__ import annotations

import statistics

HISTORY = 1.2  # ranks new to a launch taking 1.2x the own time of those that ran before it, each slower than each


def own_seconds(report: dict) -> list[float]:
    """Each rank's own seconds a repeat: its median repeat's total less the comm and wait timed in it (its waits for
    the others left out)."""
    return [
        p["median"]["total"] - p["median"].get("comm", 0.0) - p["median"].get("wait", 0.0) for p in report["per_rank"]
    ]


def new_ranks_slower(runs: list[dict]) -> list[dict]:
    """The runs of one launch, ``runs`` in the order they ran, whose ranks new to the launch (above every earlier
    run's size: each size runs on the first ranks) each took longer than each rank that had run before, their median
    HISTORY times or more, two or more of each: {ranks, mode, ran (how many ranks had run before), ratio}. There the
    slow ranks are told by what ran before them, not by where they run: what a rank's allocator kept from the larger
    shares it freed (glibc returns a block-sized heap to the OS when no larger block was ever freed, and faults it in
    again every iteration), or its caches and pages."""
    out, ran = [], 0
    for run in runs:
        n, report = run["ranks"], run["report"]
        if ran >= 2 and n - ran >= 2 and report.get("per_rank"):
            own = own_seconds(report)
            before, new = own[:ran], own[ran:n]
            base = statistics.median(before)  # none of its own (all comm and wait): no ratio to give
            ratio = statistics.median(new) / base if base > 0 else 0.0
            if min(new) > max(before) and ratio >= HISTORY:
                out.append({"ranks": n, "mode": run["mode"], "ran": ran, "ratio": ratio})
        ran = max(ran, n)
    return out


def history_advice(runs: list[dict]) -> list[str]:
    """One sentence per run ``new_ranks_slower`` finds."""
    return [
        f"At {s['ranks']} ranks ({s['mode']}): ranks {s['ran']}-{s['ranks'] - 1}, new to this launch, each took longer "
        f"than every rank that had run before in it (0-{s['ran'] - 1}), {s['ratio']:.2f}x their median own time a "
        f"repeat (comm and waits left out). A rank's history in the launch is the likely cause, not its place: memory "
        f"the allocator kept or gave back after the earlier runs (arrays of a block's size made afresh every "
        f"iteration), or caches and pages touched again. Timing this size in a launch of its own (spmd run at "
        f"{s['ranks']} ranks) tells; a workload that keeps its temporaries from the first repeat on does not show it."
        for s in new_ranks_slower(runs)
    ]

"""The sweep's part of an interval, in-sample on the CPU rounds whose target's link tests measured their own cores.
Each folder's records are derived again (bench recheck, in a copy) twice: with the fitted lines' misfit on every local
second, the rule before (``misfit_everywhere`` in place of ``sweep_part``), and with the rule, which leaves out the
compute priced on the sweep's own run of that share (``intervals.sweep_part``). Both are derived by the model as the
ninth CPU round froze it (``heldoutcpu9.FROZEN``, ``derived_at``), so that the table stays this design's as the model
moves on; the rule is the seventh round's, and a later change moved the carried predictions. Per folder and kind of
input: the mean |error| (each record's median run), how many runs' measured times fell inside their intervals, the
intervals' median half-width (a share of the prediction), how many reached down to zero, and how many speedup
intervals had no upper end. Design evidence only: the rounds shaped the rule.

    python -m bench.tools.interval_design docs/results/cpu-16core/heldoutcpu4 docs/results/cpu-16core/heldoutcpu5 ...
"""

import math
import statistics
from pathlib import Path

from bench.suites import heldoutcpu9
from bench.tools.heldout_inputs import derived_at, table_main
from spmd.scale.prediction import predict


def misfit_everywhere(uncertainty: tuple[float, float], local_s: float, measured_s: float) -> float:
    """The sweep's part as it was: both parts, in quadrature, on every local second."""
    return math.hypot(*uncertainty) * local_s


# the rule before, a patch of the model where it is derived
BEFORE = ((predict, "sweep_part", misfit_everywhere),)


def derived(folder: Path, before: bool) -> dict[str, list]:
    """kind -> ``folder``'s records derived again in a copy, by the rule before or with the rule."""
    kinds: dict[str, list] = {}
    patches = "bench.tools.interval_design:BEFORE" if before else None
    for r in derived_at(folder, heldoutcpu9.FROZEN, patches):
        kinds.setdefault(r.params["kind"], []).append(r)
    return kinds


def cell(records: list) -> str:
    runs = [p for r in records for p in (r.params.get("runs") or [r.params])]
    inside = sum(p["interval"][0] <= p["measured_s"] <= p["interval"][1] for p in runs)
    half = statistics.median((p["interval"][1] - p["interval"][0]) / 2 / p["predicted_s"] for p in runs)
    zero = sum(p["interval"][0] <= 0 for p in runs)
    open_above = sum(1 for p in runs if p.get("speedup_interval") and p["speedup_interval"][1] is None)
    return f"{inside} of {len(runs)}, {half:.0%}, {zero}, {open_above}"


def table(folders: list[Path]) -> str:
    lines = [
        "| records of | input | mean error | misfit on every second: inside, half-width, at zero, open speedups "
        f"| at {heldoutcpu9.FROZEN[:7]}: misfit on the lines' seconds |",
        "|---|---|---|---|---|",
    ]
    for folder in folders:
        before, after = derived(folder, True), derived(folder, False)
        for kind, records in after.items():
            error = statistics.mean(statistics.median(r.values) for r in records)
            lines.append(f"| {folder.name} | {kind} | {error:.1%} | {cell(before[kind])} | {cell(records)} |")
    return "\n".join(lines) + "\n"


def main():
    table_main(table)


if __name__ == "__main__":
    main()

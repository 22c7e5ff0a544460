"""Another node's cores test standing in for the target's (``node.STAND_IN_CORES``), in-sample on the CPU rounds 4-9.
Each folder's records are derived again (bench recheck, in a copy) twice. First by the model as the ninth CPU round
froze it (``heldoutcpu9.FROZEN``), whose carried prediction held a compute phase beyond the sweep's ranks a node at the
sweep's node term, the stored slowdown only its interval's top. Then by the model with the stand-in, as the tenth round
froze it (``heldoutcpu10.FROZEN``), charged as the target's own test would be (``predict.with_node_cores``), the
kernels' geometric mean in the prediction and their ends in the interval. Both are derived there (``derived_at``). Per
folder, kind of input and ranks, as ``carried_design`` counts them: the mean |error| (each run), how many runs'
measured times fell inside their intervals and how many lay above, the intervals' median half-width (a share of the
prediction), how many reached down to zero, and the median signed error (predicted against measured; below zero, too
fast). Design evidence only: the rounds shaped the change.

    python -m bench.tools.stand_in_design docs/results/cpu-16core/heldoutcpu4 ... docs/results/cpu-16core/heldoutcpu9
"""

import statistics
from pathlib import Path

from bench.suites import heldoutcpu9, heldoutcpu10
from bench.tools.carried_design import cell, runs_of
from bench.tools.heldout_inputs import derived_at, table_main


def signed(records: list, kind: str, ranks: int) -> str:
    """The median of (predicted / measured - 1) over the runs of ``kind`` at ``ranks``."""
    runs = runs_of(records, kind, ranks)
    return f"{statistics.median(q['predicted_s'] / q['measured_s'] - 1 for q in runs):+.1%}"


def table(folders: list[Path]) -> str:
    lines = [
        f"| records of | input | ranks | as frozen at {heldoutcpu9.FROZEN[:7]}: mean error, inside (above), "
        f"half-width, at zero; median error | as frozen at {heldoutcpu10.FROZEN[:7]}, the stand-in: the same |",
        "|---|---|---|---|---|",
    ]
    for folder in folders:
        before, after = derived_at(folder, heldoutcpu9.FROZEN), derived_at(folder, heldoutcpu10.FROZEN)
        for kind in sorted({r.params["kind"] for r in after}):
            for ranks in (4, 8):
                old = f"{cell(before, kind, ranks)}; {signed(before, kind, ranks)}"
                new = f"{cell(after, kind, ranks)}; {signed(after, kind, ranks)}"
                lines.append(f"| {folder.name} | {kind} | {ranks} | {old} | {new} |")
    return "\n".join(lines) + "\n"


def main():
    table_main(table)


if __name__ == "__main__":
    main()

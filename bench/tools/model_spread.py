"""The model's own error out of sample (spmd.scale.prediction.intervals.MODEL_SPREAD), in-sample: its design, the
95th percentile each side of how far the stored held-out rounds' measured speedups lay outside the rest of their
intervals (bench.suites.heldout.spread_design), and how often those runs' measured speedups and times fall inside their
intervals without it and with it, with the speedup intervals' median half-width, per machine and input kind.

    python -m bench.tools.model_spread docs/results/h200x2/heldout* docs/results/h200x4/heldout*
"""

import argparse
import statistics
import tempfile
from pathlib import Path
from unittest import mock

from bench.suites.heldout import checked_row, spread_design
from bench.tools.heldout_inputs import inside, stored_runs
from spmd.scale.prediction import intervals


def _rows(folders: list[Path]) -> list[dict]:
    """Per stored run: {machine, kind, speedup inside, time inside, the speedup interval's half-width}."""
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        for folder in folders:
            for record, run, files in stored_runs(folder, Path(scratch), None, lambda r: True):
                c = checked_row(files, run["target"], run["mode"], run["ranks"])
                low, high = c["speedup_interval"]
                middle = c["measured_speedup"] * (1 + c["speedup_error"])  # the predicted speedup
                out.append(
                    {
                        "machine": folder.parent.name,
                        "kind": record.params["kind"],
                        "speedup": low <= c["measured_speedup"] <= (high or float("inf")),
                        "time": inside(c),
                        "half": (high - low) / 2 / middle if high else None,
                    }
                )
    return out


def _cell(rows: list[dict]) -> str:
    halves = [r["half"] for r in rows if r["half"] is not None]
    return (
        f"{sum(r['speedup'] for r in rows)} of {len(rows)}, half-width {statistics.median(halves):.1%}; "
        f"times {sum(r['time'] for r in rows)} of {len(rows)}"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    folders = parser.parse_args().folders
    design = spread_design(folders)
    p95 = [statistics.quantiles(design[side], n=20)[-1] for side in ("below", "above")]
    print(f"95th percentile below {p95[0]:.3f}, above {p95[1]:.3f} over {len(design['below'])} runs")
    with mock.patch.object(intervals, "MODEL_SPREAD", (0.0, 0.0)):
        without = _rows(folders)
    with_it = _rows(folders)
    print("| runs of | from | runs | without the model's error: speedups inside, median half-width; times | with it |")
    print("|---|---|---|---|---|")
    groups = sorted({(r["machine"], r["kind"]) for r in with_it}) + [("all", "all")]
    for machine, kind in groups:
        pick = [i for i, r in enumerate(with_it) if machine in ("all", r["machine"]) and kind in ("all", r["kind"])]
        print(
            f"| {machine} | {kind} | {len(pick)} | {_cell([without[i] for i in pick])} | "
            f"{_cell([with_it[i] for i in pick])} |"
        )


if __name__ == "__main__":
    main()

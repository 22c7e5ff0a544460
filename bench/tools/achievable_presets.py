"""The presets' achievable figures, in-sample: each stored held-out run predicted from a preset (its links, inside and
between nodes, looked up) by the model as it is, with the presets' achievable bus bandwidth (as published for NCCL's
ring) and with their line rates instead (as before), per round and kind: mean and worst |error|, how many inside.

    python -m bench.tools.achievable_presets docs/results/h200x2/heldout* docs/results/h200x4/heldout*
"""

import argparse
import statistics
import tempfile
from pathlib import Path
from unittest import mock

from bench.suites.heldout import checked_row
from bench.tools.heldout_inputs import inside, stored_runs
from spmd.scale.prediction import machines


def _line_rates(presets: dict) -> dict:
    """The presets with their line rate where the achievable figure stands."""
    return {name: (line, line, *rest) for name, (_, line, *rest) in presets.items()}


def _rows(folders: list[Path]) -> list[dict]:
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        for folder in folders:
            for record, run, files in stored_runs(folder, Path(scratch), None, lambda r: "preset" in r.params["kind"]):
                row = {"where": f"{folder.parent.name}/{folder.name}", "kind": record.params["kind"]}
                for who, intra, inter in (
                    ("line", _line_rates(machines.INTRA_PRESETS), _line_rates(machines.INTER_PRESETS)),
                    ("achievable", machines.INTRA_PRESETS, machines.INTER_PRESETS),
                ):
                    with mock.patch.multiple(machines, INTRA_PRESETS=intra, INTER_PRESETS=inter):
                        c = checked_row(files, run["target"], run["mode"], run["ranks"])
                    row[who] = (abs(c["error"]), inside(c))
                out.append(row)
    return out


def _cell(rows: list[dict], who: str) -> str:
    errors = [r[who][0] for r in rows]
    return (
        f"{statistics.mean(errors):.1%}, worst {max(errors):.1%}, {sum(r[who][1] for r in rows)} of {len(rows)} inside"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    rows = _rows(parser.parse_args().folders)
    print("| round | from | runs | line rates: mean, worst, inside | achievable |")
    print("|---|---|---|---|---|")
    for where, kind in [*sorted({(r["where"], r["kind"]) for r in rows}), ("all", "all")]:
        pick = [r for r in rows if where in ("all", r["where"]) and kind in ("all", r["kind"])]
        print(f"| {where} | {kind} | {len(pick)} | {_cell(pick, 'line')} | {_cell(pick, 'achievable')} |")


if __name__ == "__main__":
    main()

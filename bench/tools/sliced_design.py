"""The sliced operand's design, in-sample: the held-out rounds' matmul fitted again on one GPU with a share that reads
its slice of B and lists B as sliced (``docs/results/h200x1/matmul-sliced``), predicted for each round's stored 2-GPU
runs from the ``nvlink4`` preset and the target's link test, by the model as it is and with the slice hidden from it
(each fitted run's ``sliced`` removed: a rank's reads and copies in on its share of A alone, the model before).

    python -m bench.tools.sliced_design docs/results/h200x1/matmul-sliced docs/results/h200x2/heldout* \
        [--engines tests/fixtures/links/FILE]

Prints, for strong and weak rows, the copies in (h2d) and reads predicted against measured, and the time's error.
"""

import argparse
import gzip
import json
import statistics
import tempfile
from pathlib import Path

from bench.suites.heldout import checked_row
from bench.suites.heldout3 import PRESET, TARGETS
from bench.tools.heldout_inputs import inside, parsed, stored_runs

KINDS = (PRESET, TARGETS)


def _hidden(fit: dict) -> dict:
    """The fit with every run's sliced operand removed: the model before it."""

    def without(run: dict) -> dict:
        problem = {k: v for k, v in run["report"]["problem"].items() if k != "sliced"}
        return {**run, "report": {**run["report"], "problem": problem}}

    return {**fit, "runs": [without(r) for r in fit["runs"]], "share_runs": [without(r) for r in fit["share_runs"]]}


def _matmul_fitted_on_one(record) -> bool:
    return (
        record.case.startswith("held-out matmul")
        and "fitted on 1 GPU" in record.case
        and record.params.get("kind") in KINDS
    )


def design(refits: Path, folders: list[Path], engines: dict | None) -> list[dict]:
    """Per stored run and refit: {mode, round, kind, before, after}, each {error, inside, h2d, read} ([measured,
    predicted] seconds for the phases)."""
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        for folder in folders:
            fits = sorted(refits.glob(f"fit-{folder.name}-*.json.gz"))
            if not fits:
                continue
            for number, fit in enumerate(fits):
                after = tmp / f"after-{number}.json"
                after.write_bytes(gzip.decompress(fit.read_bytes()))
                before = tmp / f"before-{number}.json"
                before.write_text(json.dumps(_hidden(json.loads(after.read_text()))))
            for r, run, files in stored_runs(folder, tmp, engines, _matmul_fitted_on_one):
                for number in range(len(fits)):
                    row = {"mode": run["mode"], "round": folder.name, "kind": r.params["kind"]}
                    for tag in ("before", "after"):
                        c = checked_row({**files, "fit": tmp / f"{tag}-{number}.json"}, run["target"], run["mode"], 2)
                        row[tag] = {
                            "error": c["error"],
                            "inside": inside(c),
                            **{p: c["phases"][p] for p in ("h2d", "read")},
                        }
                    out.append(row)
    return out


def _span(values: list[float]) -> str:
    return f"{min(values):+.0%} to {max(values):+.0%}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("refits", type=Path)
    parser.add_argument("folders", nargs="+", type=Path)
    args, engines = parsed(parser)
    rows = design(args.refits, args.folders, engines)
    print(
        "| rows | predictions | h2d, predicted against measured: before, after | read: before, after "
        "| time's error: before | after |"
    )
    print("|---|---|---|---|---|---|")
    for mode in ("strong", "weak"):
        some = [r for r in rows if r["mode"] == mode]
        cells = [
            ", ".join(_span([r[t][phase][1] / r[t][phase][0] - 1 for r in some]) for t in ("before", "after"))
            for phase in ("h2d", "read")
        ]
        for tag in ("before", "after"):
            errors = [r[tag]["error"] for r in some]
            cells.append(
                f"{_span(errors)}, mean {statistics.mean(map(abs, errors)):.1%}, "
                f"{sum(r[tag]['inside'] for r in some)} of {len(some)} inside"
            )
        print(f"| {mode} at 2 | {len(some)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

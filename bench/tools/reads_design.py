"""The seventh held-out round's design, in-sample: the held-out rounds' runs fitted on one GPU and predicted from the
``nvlink4`` preset, predicted again with the host's reads given (target key ``host_read``), from the stored inputs by
the model as it is. The reads are each run's target link test's, a stand-in for the fit's own (two ranks sharing one
GPU read by direct as fast as two on their own, by turns on 2 H200s); where that file predates the reads by engine,
the host's direct reads recorded on the same machine are added (``--engines``, as the sixth round's design did).

    python -m bench.tools.reads_design docs/results/h200x2/heldout* [--engines tests/fixtures/links/FILE]
"""

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from bench.records import read_records
from bench.suites.heldout import _unpacked, checked_row
from bench.suites.heldout3 import PRESET, TARGETS
from bench.tools.heldout_inputs import inside, parsed


def design(folders: list[Path], engines: dict | None) -> list[dict]:
    """Per run of a preset prediction fitted on one GPU: {round, case, run, preset, with_reads} (each [error,
    inside the interval])."""
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        for folder in folders:
            records = read_records(folder / "records.jsonl")
            links = {
                (r.case.split(": ")[0], i): run["inputs"]["links"]
                for r in records
                if r.params.get("kind") == TARGETS
                for i, run in enumerate(r.params.get("runs") or [r.params])
            }
            for r in (r for r in records if r.params.get("kind") == PRESET and "fitted on 1 GPU" in r.case):
                for i, run in enumerate(r.params.get("runs") or [r.params]):
                    files = {role: _unpacked(folder / s, tmp) for role, s in run["inputs"].items()}
                    stored = json.loads(_unpacked(folder / links[(r.case.split(": ")[0], i)], tmp).read_text())
                    reads = stored["host_read"]
                    if engines and "engines" not in reads:
                        reads = {**reads, "engines": engines}
                    measured = {"kind": "host_read", "device": stored["device"], "ranks": stored["ranks"]}
                    (tmp / "reads.json").write_text(json.dumps({**measured, "host_read": reads}))
                    row = {"round": folder.name, "case": r.case, "run": i}
                    for tag, given in (("preset", files), ("with_reads", {**files, "host_read": tmp / "reads.json"})):
                        c = checked_row(given, run["target"], run["mode"], 2)
                        row[tag] = [c["error"], inside(c)]
                    out.append(row)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    args, engines = parsed(parser)
    rows = design(args.folders, engines)
    print("| round | runs | preset: mean, worst, inside | with the host's reads: mean, worst, inside |")
    print("|---|---|---|---|")
    for name in [*dict.fromkeys(r["round"] for r in rows), "all"]:
        some = [r for r in rows if name in ("all", r["round"])]
        cells = [
            f"{statistics.mean(abs(r[t][0]) for r in some):.1%}, {max(abs(r[t][0]) for r in some):.1%}, "
            f"{sum(r[t][1] for r in some)} of {len(some)}"
            for t in ("preset", "with_reads")
        ]
        print(f"| {name} | {len(some)} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()

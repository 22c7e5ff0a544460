"""A share's reader threads, in-sample: the held-out rounds' array cases fitted on one GPU with a share reading with
the node's threads (``old``) and with those a rank of 2 gets (``new``, ``docs/results/h200x1/share-threads``),
predicted for each round's stored 2-GPU runs from the ``nvlink4`` preset and the target's link test by the model as it
is. An old matmul share lists no sliced operand: it is added, so that the two differ by their threads alone.

    python -m bench.tools.share_threads docs/results/h200x1/share-threads docs/results/h200x2/heldout* \
        [--engines tests/fixtures/links/FILE]
"""

import argparse
import gzip
import json
import re
import statistics
import tempfile
from pathlib import Path

from bench.suites.heldout import checked_row
from bench.suites.heldout3 import PRESET, TARGETS
from bench.suites.predict import slug
from bench.tools.heldout_inputs import inside, parsed, stored_runs

KINDS = (PRESET, TARGETS)
WHO = ("old", "new")


def _fit(packed: Path, out: Path) -> Path:
    """A fit unpacked to ``out``, each run of an old matmul share given the sliced operand it read (B, in slices)."""
    fit = json.loads(gzip.decompress(packed.read_bytes()))
    for run in fit["runs"] + fit.get("share_runs", []):
        problem = run["report"]["problem"]
        gathers = [o for o in problem.get("comm", []) if o["op"] == "allgather" and o.get("ranks_power") == -1.0]
        if gathers and "sliced" not in problem:
            problem["sliced"] = {"bytes": gathers[0]["bytes"], "parts": run.get("share_of") or 1}
    out.write_text(json.dumps(fit))
    return out


def _name(record) -> str:
    return slug(re.sub(r", (strong|weak), fitted.*", "", record.case).removeprefix("held-out "))


def _packed(refits: Path, folder: Path, record, who: str) -> Path:
    return refits / f"{folder.name}--{_name(record)}--{who}.json.gz"


def design(refits: Path, folders: list[Path], engines: dict | None) -> list[dict]:
    """Per stored run: {family, mode, kind, old, new}, each (error, inside the interval, read [measured, predicted])."""
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        for folder in folders:

            def refitted(r) -> bool:  # fitted on one GPU, from a kind compared, its case fitted again both ways
                return (
                    "fitted on 1 GPU" in r.case
                    and r.params.get("kind") in KINDS
                    and all(_packed(refits, folder, r, who).exists() for who in WHO)
                )

            for r, run, files in stored_runs(folder, tmp, engines, refitted):
                fits = {who: _fit(_packed(refits, folder, r, who), tmp / f"{who}.json") for who in WHO}
                row = {"family": _name(r).split("-")[0], "mode": run["mode"], "kind": r.params["kind"]}
                for who, fit in fits.items():
                    c = checked_row({**files, "fit": fit}, run["target"], run["mode"], 2)
                    row[who] = (c["error"], inside(c), c["phases"].get("read"))
                rows.append(row)
    return rows


def _cell(rows: list[dict], who: str) -> str:
    errors = [r[who][0] for r in rows]
    reads = [r[who][2][1] / r[who][2][0] - 1 for r in rows if r[who][2]]
    return (
        f"{statistics.mean(map(abs, errors)):.1%}, {sum(r[who][1] for r in rows)} of {len(rows)} inside; "
        f"read {statistics.median(reads):+.0%}"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("refits", type=Path)
    parser.add_argument("folders", nargs="+", type=Path)
    args, engines = parsed(parser)
    rows = design(args.refits, args.folders, engines)
    print("| runs of | from | predictions | the node's threads: mean error, inside; read (median) | a rank of 2's |")
    print("|---|---|---|---|---|")
    groups = [(f, k) for f in sorted({r["family"] for r in rows}) for k in KINDS] + [("all", k) for k in KINDS]
    for family, kind in [*groups, ("all", "both")]:
        some = [r for r in rows if family in ("all", r["family"]) and kind in ("both", r["kind"])]
        print(f"| {family} | {kind} | {len(some)} | {_cell(some, 'old')} | {_cell(some, 'new')} |")


if __name__ == "__main__":
    main()

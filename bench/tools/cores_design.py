"""The node's cores test (``spmd bench comm --links`` on CPUs, spmd.measure.cores) as the CPU rounds' predictions from
the target's link test would have used it, in-sample: each round's stored link tests of 4 and 8 ranks were measured
before the test existed, so a copy of each is given the ``node_cores`` of design launches measured apart (``--cores``:
links files of this spmd at those rank counts, their median per figure), and each folder's records are derived again
(bench recheck, in a copy) with and without it. Per folder, kind of input and rank count: mean and worst |error|
(each record's median run) and how many runs' measured times fell inside their intervals. Design evidence only: the
design launches are not the rounds' own, and the rounds shaped the rule.

    python -m bench.tools.cores_design docs/results/cpu-16core/heldoutcpu* --cores docs/results/cpu-16core/cores-design
"""

import argparse
import gzip
import json
import shutil
import statistics
import tempfile
from pathlib import Path

from bench.records import read_records
from bench.suites.heldoutcpu import TARGET_RANKS
from bench.suites.predict import recheck

KEYS = ("slowdown", "low", "high")


def design_cores(folder: Path) -> dict[int, dict]:
    """ranks -> the median of each figure of the ``node_cores`` the links files under ``folder`` measured at them."""
    by_ranks: dict[int, list[dict]] = {}
    for path in sorted(folder.glob("*.json")):
        cores = json.loads(path.read_text()).get("node_cores")
        if cores:
            by_ranks.setdefault(cores["ranks"], []).append(cores)
    return {n: {"ranks": n, **{k: statistics.median(c[k] for c in cs) for k in KEYS}} for n, cs in by_ranks.items()}


def given_cores(folder: Path, cores: dict[int, dict]) -> None:
    """Each stored link test of the target's ranks under ``folder`` (a copy) given the design's cores at its ranks."""
    for n in TARGET_RANKS:
        for path in (folder / "inputs").glob(f"*-links-{n}.json.gz"):
            data = json.loads(gzip.decompress(path.read_bytes()))
            data["node_cores"] = cores[n]
            path.write_bytes(gzip.compress(json.dumps(data).encode()))


def summary(folder: Path, cores: dict[int, dict] | None) -> dict:
    """(kind, ranks) -> 'mean, worst, inside' of ``folder``'s records derived again, the target's link tests given
    ``cores`` (None: as stored)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(shutil.copytree(folder, Path(tmp) / folder.name))
        if cores:
            given_cores(copy, cores)
        recheck(copy)
        records = read_records(copy / "records.jsonl")
    groups: dict = {}
    for r in records:
        groups.setdefault((r.params["kind"], r.params["ranks"]), []).append(r)
    out = {}
    for key, rs in sorted(groups.items()):
        errors = [statistics.median(r.values) for r in rs]
        runs = [p for r in rs for p in (r.params.get("runs") or [r.params])]
        inside = sum(p["interval"][0] <= p["measured_s"] <= p["interval"][1] for p in runs)
        out[key] = f"{statistics.mean(errors):.1%}, worst {max(errors):.1%}, {inside} of {len(runs)}"
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--cores", type=Path, required=True, help="a folder of links files of the design launches")
    args = parser.parse_args()
    cores = design_cores(args.cores)
    for n, c in sorted(cores.items()):
        print(f"design cores at {n}: x{c['slowdown']:.2f} (x{c['low']:.2f} - x{c['high']:.2f})")
    print("| records of | input | ranks | as stored: mean, worst, inside | with the cores test |")
    print("|---|---|---|---|---|")
    for folder in args.folders:
        before, after = summary(folder, None), summary(folder, cores)
        for (kind, n), text in before.items():
            print(f"| {folder.name} | {kind} | {n} | {text} | {after[(kind, n)]} |")


if __name__ == "__main__":
    main()

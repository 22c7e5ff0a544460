"""The node's cores test (``spmd bench comm --links`` on CPUs, spmd.measure.cores) as the CPU rounds' predictions from
the target's link test would have used it, in-sample. The first three rounds' stored link tests of 4 and 8 ranks were
measured before the test existed, so a copy of each is given the ``node_cores`` of design launches measured apart
(``--cores``, a folder of links files of this spmd at those rank counts, their median per figure); a round whose link
tests measured their own keeps them. Each folder's records are then derived again (bench recheck, in a copy) three
ways. First without the cores test, then with the cores charged on a phase's fitted line (the rule as first frozen),
then by the model as it is, whose time alone is the sweep's own run of that share. Per folder, kind of input and rank
count, the table gives the mean and worst |error| (each record's median run) and how many runs' measured times fell
inside their intervals. Design evidence only, since the design launches are not the rounds' own and the rounds shaped
the rule.

    python -m bench.tools.cores_design docs/results/cpu-16core/heldoutcpu* --cores docs/results/cpu-16core/cores-design
"""

import argparse
import contextlib
import gzip
import json
import shutil
import statistics
import tempfile
from pathlib import Path
from unittest import mock

from bench.records import read_records
from bench.suites.heldoutcpu import TARGET_RANKS
from bench.suites.predict import recheck
from spmd.scale.models import node
from spmd.scale.models.phases import phase_bytes

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
            if data.get("node_cores"):
                continue  # measured in the round's own launch
            data["node_cores"] = cores[n]
            path.write_bytes(gzip.compress(json.dumps(data).encode()))


def line_alone(model: dict, phase: str, share: float, parts: int) -> float:
    """alone_seconds as first frozen: the phase's fitted line, whatever the sweep measured of that share."""
    f = model["local"][phase]
    return max(0.0, f["intercept_s"] + phase_bytes(model, phase, share, parts) * f["seconds_per_byte"])


def summary(folder: Path, cores: dict[int, dict] | None, line: bool = False) -> dict:
    """(kind, ranks) -> 'mean, worst, inside' of ``folder``'s records derived again, the target's link tests given
    ``cores`` (None: as stored, the round's own kept), a phase's time alone its line where ``line``."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if line:
            stack.enter_context(mock.patch.object(node, "alone_seconds", line_alone))
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
    head = ("records of", "input", "ranks", "without the cores test", "the cores on the line", "the model: on the run")
    print("| " + " | ".join(head) + " |")
    print("|---|---|---|---|---|---|")
    for folder in args.folders:
        with tempfile.TemporaryDirectory() as tmp:  # without: a copy with the round's own cores taken out
            bare = Path(shutil.copytree(folder, Path(tmp) / folder.name))
            for path in (bare / "inputs").glob("*-links-*.json.gz"):
                data = json.loads(gzip.decompress(path.read_bytes()))
                data.pop("node_cores", None)
                path.write_bytes(gzip.compress(json.dumps(data).encode()))
            before = summary(bare, None)
        on_line, after = summary(folder, cores, line=True), summary(folder, cores)
        for (kind, n), text in before.items():
            print(f"| {folder.name} | {kind} | {n} | {text} | {on_line[(kind, n)]} | {after[(kind, n)]} |")


if __name__ == "__main__":
    main()

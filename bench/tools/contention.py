"""What ranks on one CPU node cost each other, in the CPU rounds' stored runs: each round's fit measured the share a
rank of 4 and of 8 holds alone on one rank (``spmd scale --shares 4,8``) and its target measured the same share on 4
and 8 ranks at once (strong). Per round, rank count and phase: the time at once over the time alone (median and range
over cases and runs). Then the rounds derived again by the model as it is (bench recheck, in a copy): per series and
rank count, each run's measured time over its prediction from the fit's links carried (median and range), and how many
runs lay above and below their interval.

    python -m bench.tools.contention docs/results/cpu-16core/heldoutcpu docs/results/cpu-16core/heldoutcpu2 \
        docs/results/cpu-16core/heldoutcpu3
"""

import argparse
import gzip
import json
import statistics
from pathlib import Path

from bench.suites.heldoutcpu import CARRIED, TARGET_RANKS
from bench.tools.heldout_inputs import derived_records


def _points(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["model"]["points"]


def at_once(folder: Path) -> dict:
    """(ranks, phase) -> [the share's time with ``ranks`` ranks at once over its time alone on one rank], over the
    folder's cases and runs."""
    out: dict = {}
    for fit in sorted((folder / "inputs").glob("*-fit.json.gz")):
        if "-links-" in fit.name:
            continue
        fitted, measured = _points(fit), _points(fit.with_name(fit.name.replace("-fit.", "-measured.")))
        whole = next(p["problem_bytes"] for p in fitted if p["mode"] == "strong" and p["ranks"] == 1)
        for n in TARGET_RANKS:
            alone = next(p for p in fitted if p["ranks"] == 1 and abs(p["problem_bytes"] - whole / n) < 1)
            together = next(p for p in measured if p["mode"] == "strong" and p["ranks"] == n)
            for phase, timed in alone["phases"].items():
                if phase != "comm" and timed["measured_s"] > 0:
                    ratio = together["phases"][phase]["measured_s"] / timed["measured_s"]
                    out.setdefault((n, phase), []).append(ratio)
    return out


def against_predictions(folder: Path) -> dict:
    """(mode, ranks) -> [(measured / predicted, above its interval, below it)] of each run predicted from the fit's
    links carried, the folder derived again by the model as it is."""
    out: dict = {}
    for r in derived_records(folder):
        if r.params["kind"] != CARRIED:
            continue
        for run in r.params.get("runs") or [r.params]:
            low, high = run["interval"]
            m = run["measured_s"]
            out.setdefault((r.params["mode"], r.params["ranks"]), []).append(
                (m / run["predicted_s"], m > high, m < low)
            )
    return out


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f} - {max(values):.2f}, {len(values)})"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    folders = parser.parse_args().folders
    print("| records of | ranks at once | phase | at once / alone: median (range, runs) |")
    print("|---|---|---|---|")
    for folder in folders:
        for (n, phase), ratios in sorted(at_once(folder).items()):
            print(f"| {folder.parent.name}/{folder.name} | {n} | {phase} | {_spread(ratios)} |")
    print()
    pooled: dict = {}
    for folder in folders:
        for key, runs in against_predictions(folder).items():
            pooled.setdefault(key, []).extend(runs)
    print("| series at | measured / predicted: median (range, runs) | above the interval | below it |")
    print("|---|---|---|---|")
    for (mode, n), runs in sorted(pooled.items()):
        ratios = [r for r, _, _ in runs]
        above, below = sum(a for _, a, _ in runs), sum(b for _, _, b in runs)
        print(f"| {mode} at {n} | {_spread(ratios)} | {above} | {below} |")


if __name__ == "__main__":
    main()

"""A host's reads by 2 ranks carried to 3 and 4, against what 3 and 4 read together in the same round: each round's
files (``roundR-SIZE-N.json``, ``spmd bench comm --host-read`` with N ranks sharing one GPU, by turns) predicted by
spmd.scale.prediction.reads.shared_rate as its engine is (direct: the measured rate is the host's whole) and as if
its readers were each rank's own (carried by the contention the 2 showed).

    python -m bench.tools.host_read_carried docs/results/h200x1/host-read-carried
"""

import argparse
import json
import statistics
from pathlib import Path

from spmd.scale.prediction.reads import shared_rate


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args().folder
    print(
        "| size a rank | round | 2 ranks: alone, together (GB/s) | ranks | measured together | its engine's rule | "
        "carried |"
    )
    print("|---|---|---|---|---|---|---|")
    errors = {"rule": [], "carried": []}
    for size in ("256M", "1G"):
        for path in sorted(folder.glob(f"round*-{size}-2.json")):
            round_ = path.name.split("-")[0].removeprefix("round")
            two = json.loads(path.read_text())["host_read"]
            for n in (3, 4):
                measured = json.loads((folder / f"round{round_}-{size}-{n}.json").read_text())["host_read"]
                together = measured["together_Bps"]
                rule = shared_rate(two, n) / together - 1
                carried = shared_rate({**two, "engine": "mapped"}, n) / together - 1
                errors["rule"].append(abs(rule))
                errors["carried"].append(abs(carried))
                print(
                    f"| {size} | {round_} | {two['engine']}: {two['alone_Bps'] / 1e9:.1f}, "
                    f"{two['together_Bps'] / 1e9:.1f} | {n} | {together / 1e9:.1f} | {rule:+.0%} | {carried:+.0%} |"
                )
    print(
        f"\nmedian |error|: the engine's rule {statistics.median(errors['rule']):.0%}, "
        f"carried {statistics.median(errors['carried']):.0%} over {len(errors['rule'])}"
    )


if __name__ == "__main__":
    main()

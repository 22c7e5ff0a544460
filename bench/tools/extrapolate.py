"""How well `spmd scale`'s model, fitted to the small rank counts of a sweep, predicts the largest:
refit on the runs with at most FIT ranks (default: all but the largest size) and compare its
prediction with what the largest size measured, in total and per phase.

    python -m bench.tools.extrapolate results/*/scaling.json [--fit 2]
"""

import argparse
import json

from spmd.scale.sweep.analysis import held_out


def extrapolate(path, fit):
    with open(path) as f:
        return held_out(json.load(f), fit)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scaling", nargs="+")
    parser.add_argument("--fit", type=int, default=None, help="fit to runs of at most this many ranks")
    args = parser.parse_args()
    print(
        "| workload | mode | fitted to ranks | predicted at | measured | predicted | error "
        "| phase most off (measured, predicted) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for path in args.scaling:
        for r in extrapolate(path, args.fit):
            print(
                f"| {r['workload']} | {r['mode']} | <= {r['fit']} | {r['ranks']} | {r['measured_s'] * 1e3:.1f} ms | "
                f"{r['predicted_s'] * 1e3:.1f} ms | {r['error']:+.1%} | {r['worst_phase']} "
                f"({r['worst_measured_s'] * 1e3:.2f} ms, {r['worst_predicted_s'] * 1e3:.2f} ms) |"
            )


if __name__ == "__main__":
    main()

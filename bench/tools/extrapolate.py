"""How well `spmd scale`'s model, fitted to the small rank counts of a sweep, predicts the largest:
refit on the runs with at most FIT ranks (default: all but the largest size) and compare its
prediction with what the largest size measured, in total and per phase.

    python -m bench.tools.extrapolate results/*/scaling.json [--fit 2]
"""

import argparse
import json

from spmd.scale.analysis import reanalyse
from spmd.scale.model import measured, predict


def extrapolate(path, fit):
    scaling = json.load(open(path))
    top = max(r["ranks"] for r in scaling["runs"])
    fit = fit or max(r["ranks"] for r in scaling["runs"] if r["ranks"] < top)
    small = [
        {**r, "probe": [q for q in (r["probe"] or []) if q["ranks"] <= fit] or None}
        for r in scaling["runs"]
        if r["ranks"] <= fit
    ]
    model = reanalyse({**scaling, "runs": small})["model"]  # the sweep as if it had stopped at ``fit``
    rows = []
    for run in scaling["runs"]:
        if run["ranks"] != top or model is None:
            continue
        report = run["report"]
        row = next(x for x in scaling["series"][run["mode"]] if x["ranks"] == top)
        guess = predict(model, top, report["problem"]["bytes"])
        phases = {
            p: (measured({"timings": report["timings"]}, p), guess[p])
            for p in guess
            if p != "total" and p in report["timings"]
        }
        worst = max(phases, key=lambda p: abs(phases[p][1] - phases[p][0]))
        rows.append(
            {
                "workload": scaling["workload"],
                "mode": run["mode"],
                "fit": fit,
                "ranks": top,
                "measured_s": row["time"],
                "predicted_s": guess["total"],
                "error": (guess["total"] - row["time"]) / row["time"],
                "worst_phase": worst,
                "worst_measured_s": phases[worst][0],
                "worst_predicted_s": phases[worst][1],
            }
        )
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scaling", nargs="+")
    parser.add_argument("--fit", type=int, default=None, help="fit to runs of at most this many ranks")
    args = parser.parse_args()
    print(
        "| workload | mode | fitted to ranks | predicted at | measured | predicted | error | phase most off (measured, predicted) |"
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

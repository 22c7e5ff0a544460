"""The CPU rounds' link tests carried from the fit's 2 ranks to more: each call's ``spmd bench comm --links`` test on
the fit's ranks (``*-links-fit``) carried by spmd's model to the allreduce (or ``--op allgather``) on ``ranks`` ranks
of the node, against the test the same call ran there (``*-links-{ranks}``), in each round's inputs. Rendered by the
``bench:carried-calls`` block, at a commit where it names one (``bench.report.carried_calls``).

    python -m bench.tools.carried_calls cpu-16core heldoutcpu,heldoutcpu2 8 [--op allgather]   (JSON on standard output)
"""

import argparse
import gzip
import json
import statistics
from pathlib import Path

from bench import report


def calls(kind: str, suites: str, ranks: int, op: str = "allreduce") -> dict:
    """Per size of the target: the median measured time over the calls, the median carried one and their error, each
    call's own error (its carried against its measured: the 10th and 90th percentiles) and the target's own spread
    between calls (its 90th percentile over its 10th, less 1)."""
    from spmd.scale.models.links import collective_seconds
    from spmd.scale.prediction.machines import links_from_bench

    def read(path: Path) -> dict:
        return json.loads(gzip.decompress(path.read_bytes()))

    pairs = [
        (read(fit), read(fit.with_name(fit.name.replace("-links-fit", f"-links-{ranks}"))))
        for suite in suites.split(",")
        for fit in sorted((report.RESULTS / kind / suite / "inputs").glob("*-links-fit.json.gz"))
    ]
    rows = []
    for r in pairs[0][1]["levels"]["intra"][report.LINK_ROWS[op]]:
        measured = [report.seconds_at(target, r["bytes"], op) for _, target in pairs]
        carried = [
            collective_seconds(op, r["bytes"], ranks, ranks, links_from_bench(fit)["intra"], None) for fit, _ in pairs
        ]
        each = statistics.quantiles([c / m - 1 for c, m in zip(carried, measured)], n=10)
        apart = statistics.quantiles(measured, n=10)
        rows.append(
            {
                "bytes": r["bytes"],
                "size": report.size_label(r["bytes"]),
                "measured_s": statistics.median(measured),
                "carried_s": statistics.median(carried),
                "error": statistics.median(carried) / statistics.median(measured) - 1,
                "each": [each[0], each[-1]],
                "spread": apart[-1] / apart[0] - 1,
            }
        )
    return {
        "op": op,
        "calls": len(pairs),
        "from_ranks": pairs[0][0]["levels"]["intra"]["ranks"],
        "rows": rows,
        **report.against_the_goal(rows),
        "folders": [f"docs/results/{kind}/{suite}/inputs" for suite in suites.split(",")],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind")
    parser.add_argument("suites", help="comma-separated rounds under docs/results/KIND")
    parser.add_argument("ranks", type=int)
    parser.add_argument("--op", choices=sorted(report.LINK_ROWS), default="allreduce")
    args = parser.parse_args()
    print(json.dumps(calls(args.kind, args.suites, args.ranks, args.op)))


if __name__ == "__main__":
    main()

"""A CPU prediction from the fit's own links (carried), in-sample on the CPU rounds 4-8: each folder's records derived
again (bench recheck, in a copy) twice, by the model as the eighth CPU round froze it (``heldoutcpu8.FROZEN``), with
compute at every share priced on the fitted lines and only the node term carried on above (``node_beyond_seconds``),
and by the model the change made, as the ninth round froze it (``heldoutcpu9.FROZEN``). Both are derived there
(``derived_at``), the first under BEFORE. The change priced compute at a share the sweep ran on one rank on that run
(``predict.priced_alone``) and held UNMEASURED_CORES's slowdown above more ranks on a node than anything measured
(``node.unmeasured_cores_seconds``; both names are that commit's). Per folder, kind of input and ranks: the mean
|error| (each run), how many runs' measured times fell inside their intervals and how many lay above, the intervals'
median half-width (a share of the prediction) and how many reached down to zero. Also the medians behind
UNMEASURED_CORES and STAND_IN_CORES: the cores tests (``node_cores``) of the rounds' target link tests, each launch's
once. Design evidence only: the rounds shaped the change.

    python -m bench.tools.carried_design docs/results/cpu-16core/heldoutcpu4 ... docs/results/cpu-16core/heldoutcpu8
"""

import gzip
import json
import statistics
from pathlib import Path

from bench.suites import heldoutcpu8, heldoutcpu9
from bench.tools.heldout_inputs import derived_at, inside, table_main
from spmd.scale.prediction import predict


def cores_medians(folders: list[Path], key: str = "slowdown") -> dict[int, float]:
    """ranks -> the median ``key`` (the slowdown, the kernels' geometric mean, or its ends ``low`` and ``high``) the
    folders' target link tests measured at that many ranks at once, each launch's test once (a launch's cases share
    one)."""
    seen: dict[int, dict[tuple, float]] = {}
    for folder in folders:
        for path in sorted((folder / "inputs").glob("*-links-[0-9]*.json.gz")):
            cores = json.loads(gzip.decompress(path.read_bytes())).get("node_cores")
            if cores:
                launch = (cores["slowdown"], cores["low"], cores["high"])
                seen.setdefault(cores["ranks"], {})[launch] = cores[key]
    return {ranks: statistics.median(values.values()) for ranks, values in sorted(seen.items())}


# the model as the eighth CPU round froze it: compute priced on the lines, nothing held above unmeasured ranks (patches
# of the ninth round's frozen model, applied where it is derived)
BEFORE = (
    (predict, "priced_alone", lambda scaling, model: model),
    (predict, "unmeasured_cores_seconds", lambda *a: 0.0),
)


def runs_of(records: list, kind: str, ranks: int) -> list[dict]:
    """Every run of the records' predictions from ``kind`` of input at ``ranks``."""
    return [
        q
        for r in records
        if r.params["kind"] == kind
        for q in (r.params.get("runs") or [r.params])
        if q["ranks"] == ranks
    ]


def cell(records: list, kind: str, ranks: int) -> str:
    runs = runs_of(records, kind, ranks)
    error = statistics.mean(abs(q["predicted_s"] / q["measured_s"] - 1) for q in runs)
    within = sum(inside(q) for q in runs)
    above = sum(q["measured_s"] > q["interval"][1] for q in runs)
    half = statistics.median((q["interval"][1] - q["interval"][0]) / 2 / q["predicted_s"] for q in runs)
    zero = sum(q["interval"][0] <= 0 for q in runs)
    return f"{error:.1%}, {within} of {len(runs)} ({above} above), {half:.0%}, {zero}"


def table(folders: list[Path]) -> str:
    medians = ", ".join(f"x{v:.2f} at {k}" for k, v in cores_medians(folders).items())
    lines = [
        f"| records of | input | ranks | as frozen at {heldoutcpu8.FROZEN[:7]}: mean error, inside (above), "
        f"half-width, at zero | as frozen at {heldoutcpu9.FROZEN[:7]}: the same |",
        "|---|---|---|---|---|",
    ]
    for folder in folders:
        frozen = heldoutcpu9.FROZEN
        before, after = derived_at(folder, frozen, "bench.tools.carried_design:BEFORE"), derived_at(folder, frozen)
        for kind in sorted({r.params["kind"] for r in after}):
            for ranks in (4, 8):
                lines.append(
                    f"| {folder.name} | {kind} | {ranks} | {cell(before, kind, ranks)} | {cell(after, kind, ranks)} |"
                )
    return "\n".join(lines) + f"\n\nThe target link tests' median slowdowns: {medians}.\n"


def main():
    table_main(table)


if __name__ == "__main__":
    main()

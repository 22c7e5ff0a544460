"""What each doubling of the ranks adds to host MPI's smallest calls inside a node (``links.MPI_STEP_LATENCY_S``,
``links.mpi_steps``), in-sample on the CPU rounds' link tests: each call's test on 2 ranks and the same call's on 4 and
8, its allreduce and allgather, their smallest calls as ``links.fit_link`` reads them (the least of the smallest few
sizes). Per collective and doubling: the calls, the median time added (a round of MPI's recursive doubling: one a
doubling) and its 10th-90th percentiles, and that time over the steps a ring adds (an allreduce's 2 (p - 1), an
allgather's p - 1). A round's cost the same at each doubling, a ring step's not, is what the rounds rule rests on.
Design evidence only: the rounds shaped the rule.

    python -m bench.tools.mpi_steps_design docs/results/cpu-16core/heldoutcpu ... docs/results/cpu-16core/heldoutcpu10
"""

import gzip
import json
import statistics
from pathlib import Path

from bench.report import LINK_ROWS
from bench.tools.heldout_inputs import table_main
from spmd.measure.collectives import model_terms
from spmd.scale.models.links import SMALL_SIZES


def smallest(path: Path, op: str) -> float | None:
    """A links file's smallest call of ``op`` inside its node, as ``fit_link`` reads it; None where not measured."""
    rows = json.loads(gzip.decompress(path.read_bytes()))["levels"]["intra"].get(LINK_ROWS[op]) or []
    return min((r["seconds"] for r in sorted(rows, key=lambda r: r["bytes"])[:SMALL_SIZES]), default=None)


def added(folders: list[Path], op: str, start: int, end: int) -> list[float]:
    """Per call, the seconds its smallest ``op`` on ``end`` ranks took beyond its own on ``start``."""
    out = []
    for folder in folders:
        for fit in sorted((folder / "inputs").glob("*-links-fit.json.gz")):
            ends = {n: fit.with_name(fit.name.replace("-links-fit", f"-links-{n}")) for n in (4, 8)}
            files = {2: fit, **ends}
            if not all(files[n].exists() for n in (start, end)):
                continue
            a, b = smallest(files[start], op), smallest(files[end], op)
            if a is not None and b is not None:
                out.append(b - a)
    return out


def table(folders: list[Path]) -> str:
    lines = [
        "| collective | ranks | calls | added, median (MPI's one round) | 10th - 90th percentile | a ring step's |",
        "|---|---|---|---|---|---|",
    ]
    for op in LINK_ROWS:
        for start, end in ((2, 4), (4, 8)):
            times = added(folders, op, start, end)
            if len(times) < 2:
                continue
            deciles = statistics.quantiles(times, n=10)
            median = statistics.median(times)
            ring = model_terms(op, end, 8)[0] - model_terms(op, start, 8)[0]
            lines.append(
                f"| {op} | {start} to {end} | {len(times)} | {median * 1e6:.2f} us | "
                f"{deciles[0] * 1e6:.2f} to {deciles[-1] * 1e6:.2f} us | "
                f"{median / ring * 1e6:.2f} us ({ring:g} steps) |"
            )
    return "\n".join(lines) + "\n"


def main():
    table_main(table)


if __name__ == "__main__":
    main()

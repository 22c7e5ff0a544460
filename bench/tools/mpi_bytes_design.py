"""Host MPI's curve read at a call's own bytes a rank (``links._measured_ratio``), in-sample on the CPU rounds 1-11:
each folder's records derived again (bench recheck, in a copy) by the model as the eleventh CPU round froze it
(``heldoutcpu11.FROZEN``: the curve read at the bytes a link carries) and as the twelfth did (``heldoutcpu12.FROZEN``),
both there (``derived_at``). The change moves only the predictions from the fit's own link test carried (the target's
own is read at its own ranks, where both readings agree), so per workload and ranks, over every folder: the carried
runs, their mean |error| and how many measured times fell inside their intervals, the median signed error of the whole
(predicted against measured; below zero, too fast) and of the comm phase, and the comm phase's median share of the
measured time. Design evidence only: the rounds shaped the change (its link tests, ``bench:carried-calls``).

    python -m bench.tools.mpi_bytes_design docs/results/cpu-16core/heldoutcpu ... docs/results/cpu-16core/heldoutcpu11
"""

import statistics
from pathlib import Path

from bench.suites import heldoutcpu, heldoutcpu11, heldoutcpu12
from bench.tools.heldout_inputs import derived_at, inside, table_main, workload_of

WORKLOADS = ("reduce", "matmul", "stencil", "train")


def carried_runs(records: list) -> list[tuple[str, dict]]:
    """(workload, run) of every run of the records' carried predictions."""
    return [
        (workload_of(r), q)
        for r in records
        if r.params["kind"] == heldoutcpu.CARRIED
        for q in (r.params.get("runs") or [r.params])
    ]


def cell(runs: list[dict]) -> str:
    error = statistics.mean(abs(q["predicted_s"] / q["measured_s"] - 1) for q in runs)
    signed = statistics.median(q["predicted_s"] / q["measured_s"] - 1 for q in runs)
    comm = [q["phases"]["comm"] for q in runs if q["phases"].get("comm", [0])[0] > 0]
    comm_error = statistics.median(p / m - 1 for m, p in comm)
    share = statistics.median(m / q["measured_s"] for q in runs for m in [q["phases"].get("comm", [0])[0]])
    return (
        f"{error:.1%}, {sum(inside(q) for q in runs)} of {len(runs)}; {signed:+.1%}; comm {comm_error:+.0%} "
        f"(a {share:.1%} share)"
    )


def table(folders: list[Path]) -> str:
    runs = {frozen: [] for frozen in (heldoutcpu11.FROZEN, heldoutcpu12.FROZEN)}
    for folder in folders:
        for frozen, kept in runs.items():
            kept.extend(carried_runs(derived_at(folder, frozen)))
    lines = [
        f"| workload | ranks | as frozen at {heldoutcpu11.FROZEN[:7]}: mean error, inside; median error; comm's median "
        f"error (its share) | as frozen at {heldoutcpu12.FROZEN[:7]}, read at a call's own bytes: the same |",
        "|---|---|---|---|",
    ]
    for workload in WORKLOADS:
        for ranks in (4, 8):
            cells = [cell([q for w, q in kept if w == workload and q["ranks"] == ranks]) for kept in runs.values()]
            lines.append(f"| {workload} | {ranks} | {cells[0]} | {cells[1]} |")
    for ranks in (4, 8):
        cells = [cell([q for _, q in kept if q["ranks"] == ranks]) for kept in runs.values()]
        lines.append(f"| all | {ranks} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main():
    table_main(table)


if __name__ == "__main__":
    main()

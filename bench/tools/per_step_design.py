"""A training step's optimizer priced as a step's work (``phases.PER_STEP_PHASES``), in-sample on the CPU rounds 1-12.
Each folder's records are derived again (bench recheck, in a copy) by the model as the twelfth CPU round froze it
(``heldoutcpu12.FROZEN``, where the optimizer was fitted against a rank's share like any phase and priced on a share run
alone where the sweep ran one) and as the thirteenth did (``heldoutcpu13.FROZEN``, its time on the sweep's own problem
alone whatever the share), both there (``derived_at``). Per workload, ranks and series, over every folder and both
inputs (the fit's own link test carried and the target's), the table gives the runs, their mean |error| and how many
measured times fell inside their intervals, the median signed error of the whole (predicted against measured; below
zero, too fast) and of the optimizer phase, with the phase's median share of the measured time. Design evidence only:
the rounds shaped the change.

    python -m bench.tools.per_step_design docs/results/cpu-16core/heldoutcpu ... docs/results/cpu-16core/heldoutcpu12
"""

import statistics
from pathlib import Path

from bench.suites import heldoutcpu12, heldoutcpu13
from bench.tools.heldout_inputs import derived_at, inside, table_main, workload_of

PHASE = "optimizer"


def every_run(records: list) -> list[tuple[str, dict]]:
    """(workload, run) of every run of the records' predictions."""
    return [(workload_of(r), q) for r in records for q in (r.params.get("runs") or [r.params])]


def cell(runs: list[dict]) -> str:
    error = statistics.mean(abs(q["predicted_s"] / q["measured_s"] - 1) for q in runs)
    signed = statistics.median(q["predicted_s"] / q["measured_s"] - 1 for q in runs)
    text = f"{error:.1%}, {sum(inside(q) for q in runs)} of {len(runs)}; {signed:+.1%}"
    timed = [q for q in runs if q["phases"].get(PHASE, [0])[0] > 0]
    if not timed:
        return text
    phase = statistics.median(q["phases"][PHASE][1] / q["phases"][PHASE][0] - 1 for q in timed)
    share = statistics.median(q["phases"][PHASE][0] / q["measured_s"] for q in timed)
    return f"{text}; {PHASE} {phase:+.0%} (a {share:.0%} share)"


def derived_runs(folders: list[Path]) -> dict[str, list[tuple[str, dict]]]:
    """{frozen commit: (workload, run) of every prediction's runs of every folder, derived by the model there}, for the
    twelfth round's and the thirteenth's."""
    runs = {frozen: [] for frozen in (heldoutcpu12.FROZEN, heldoutcpu13.FROZEN)}
    for folder in folders:
        for frozen, kept in runs.items():
            kept.extend(every_run(derived_at(folder, frozen)))
    return runs


def training_runs(folders: list[Path]) -> dict[str, dict[tuple[int, str], list[dict]]]:
    """{frozen commit: {(ranks, series): the training cases' runs}} of ``derived_runs``."""
    grouped = {}
    for frozen, kept in derived_runs(folders).items():
        grouped[frozen] = {}
        for workload, q in kept:
            if workload == "train":
                grouped[frozen].setdefault((q["ranks"], q["mode"]), []).append(q)
    return grouped


def table(folders: list[Path]) -> str:
    runs = derived_runs(folders)
    lines = [
        f"| workload | ranks | series | as frozen at {heldoutcpu12.FROZEN[:7]}: mean error, inside; median error; the "
        f"optimizer's median error (its share) | as frozen at {heldoutcpu13.FROZEN[:7]}, the optimizer a step's work: "
        "the same |",
        "|---|---|---|---|---|",
    ]
    for ranks in (4, 8):
        for mode in ("strong", "weak"):
            cells = [
                cell([q for w, q in kept if w == "train" and q["ranks"] == ranks and q["mode"] == mode])
                for kept in runs.values()
            ]
            lines.append(f"| train | {ranks} | {mode} | {cells[0]} | {cells[1]} |")
    for ranks in (4, 8):
        cells = [cell([q for _, q in kept if q["ranks"] == ranks]) for kept in runs.values()]
        lines.append(f"| all four | {ranks} | both | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main():
    table_main(table)


if __name__ == "__main__":
    main()

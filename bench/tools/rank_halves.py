"""The two halves of a launch's ranks in the CPU rounds' measured runs. Each rank's own time a repeat is its median
repeat's total less its comm and wait, which hold its wait for others. The table gives the median of the upper half of
the ranks over that of the lower half (the median and range over every launch of the rounds given), and how many
launches' reports named a straggler, and how many named one in the upper half. A model that prices one rank for all
cannot see a difference between halves; where the measured runs show one, the slowest rank sets the time the
prediction is held against. Evidence on stored measurements only.

    python -m bench.tools.rank_halves docs/results/cpu-16core/heldoutcpu* [--workloads stencil,train] [--sweeps fit]
    python -m bench.tools.rank_halves --reports OUTDIR...   (bench/tools/halves_design.sh's launches, placed four ways)
    python -m bench.tools.rank_halves --told [--total] FOLDER...   (how often spmd scale's findings tell ranks new to
    the launch)

The same tables render in docs from ``<!-- bench:halves how=rounds|reports|told|told-total dirs=A,B -->`` blocks
(``table``), the folders under docs/results.
"""

import argparse
import gzip
import json
import statistics
from pathlib import Path

from spmd.scale.decision.history import new_ranks_slower, own_seconds


def half_ratio(own: list[float]) -> float:
    """The upper half's median own time over the lower half's (ranks in order)."""
    n = len(own)
    return statistics.median(own[n // 2 :]) / statistics.median(own[: n // 2])


def spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f} - {max(ratios):.2f})"


def load(path: Path) -> dict:
    """A stored JSON file, gzipped or not."""
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def sweeps_of(folder: Path, sweeps: str = "measured") -> list[dict]:
    """The sweeps of one launch each under ``folder``: a round's stored ones (inputs/*-SWEEPS.json.gz), or
    ``halves_design.sh``'s (scale-*.json, or gzipped)."""
    paths = sorted(folder.glob(f"inputs/*-{sweeps}.json.gz")) + sorted(folder.glob("scale-*.json*"))
    return [data for data in map(load, paths) if "runs" in data]  # a links file has no runs


def halves(folders: list[Path], workloads: set[str] | None, sweeps: str = "measured") -> dict[tuple, list]:
    """(workload, mode, ranks) -> per launch of ``sweeps`` (the measured targets' or the fits') of every round under
    ``folders``: (``half_ratio``, a straggler named, named in the upper half)."""
    rows: dict[tuple, list] = {}
    for folder in folders:
        for sweep in sweeps_of(folder, sweeps):
            if workloads and sweep["workload"] not in workloads:
                continue
            for run in sweep["runs"]:
                n, report = run["ranks"], run["report"]
                if n < 2:
                    continue
                ratio = half_ratio(own_seconds(report))
                named = report["breakdown"]["straggler"]
                key = (sweep["workload"], run["mode"], n)
                rows.setdefault(key, []).append((ratio, named is not None, bool(named and named["rank"] >= n // 2)))
    return rows


def report_halves(folder: Path) -> dict[tuple[str, str], list[list[float]]]:
    """(variant, workload) -> each launch's ranks' own seconds, from ``bench/tools/halves_design.sh``'s files
    (VARIANT-WORKLOAD-TURN.json, or gzipped: a run's report.json, or a strong sweep's scaling.json, its largest
    run)."""
    rows: dict[tuple[str, str], list] = {}
    for path in sorted([*folder.glob("*-*-*.json"), *folder.glob("*-*-*.json.gz")]):
        variant, workload, _ = path.name.split(".")[0].split("-")
        data = load(path)
        if "runs" in data:
            data = max(data["runs"], key=lambda run: run["ranks"])["report"]
        rows.setdefault((variant, workload), []).append(own_seconds(data))
    return rows


def reports_table(folders: list[Path], workloads: set[str] | None) -> str:
    """``halves_design.sh``'s launches per folder, variant and workload: the halves' ratio and each rank's own ms."""
    lines = [
        "| launches of | workload | placed | launches | upper half / lower half: median (range) | each rank's own ms "
        "(median) |",
        "|---|---|---|---|---|---|",
    ]
    for folder in folders:
        rows = sorted(report_halves(folder).items(), key=lambda kv: kv[0][::-1])
        for (variant, workload), launches in rows:
            if workloads and workload not in workloads:
                continue
            ratios = [half_ratio(own) for own in launches]
            ranks = " ".join(
                f"{statistics.median(own[r] for own in launches) * 1e3:.0f}" for r in range(len(launches[0]))
            )
            lines.append(
                f"| {folder.parent.name}/{folder.name} | {workload} | {variant} | {len(launches)} | {spread(ratios)} "
                f"| {ranks} |"
            )
    return "\n".join(lines) + "\n"


def told_counts(folders: list[Path], workloads: set[str] | None) -> dict[tuple[str, str, int], list[bool]]:
    """(folder's label, workload, size) -> per launch whether spmd scale's findings told the ranks new to the launch
    slowed by their history (``new_ranks_slower``, as the sweep runs it on its runs in the order they ran)."""
    counts: dict[tuple[str, str, int], list[bool]] = {}
    for folder in folders:
        for sweep in sweeps_of(folder):
            if workloads and sweep["workload"] not in workloads:
                continue
            told = {found["ranks"] for found in new_ranks_slower(sweep["runs"])}
            for n in sorted({r["ranks"] for r in sweep["runs"] if r["mode"] == "strong" and r["ranks"] >= 4}):
                key = (f"{folder.parent.name}/{folder.name}", sweep["workload"], n)
                counts.setdefault(key, []).append(n in told)
    return counts


def told_table(folders: list[Path], workloads: set[str] | None, total: bool = False) -> str:
    """How often the findings told a launch's history: per folder, workload and size, or (``total``) per workload
    and size over every folder given."""
    counts = told_counts(folders, workloads)
    if total:
        summed: dict[tuple[str, str, int], list[bool]] = {}
        for (_, workload, n), launches in counts.items():
            summed.setdefault(("all given", workload, n), []).extend(launches)
        counts = summed
    lines = [
        "| launches of | workload | ranks | launches | told: ranks new to the launch slowed by their history |",
        "|---|---|---|---|---|",
    ]
    labels = list(dict.fromkeys(label for label, _, _ in counts))  # the folders in the order given
    for (label, workload, n), launches in sorted(counts.items(), key=lambda kv: (labels.index(kv[0][0]), kv[0])):
        lines.append(f"| {label} | {workload} | {n} | {len(launches)} | {sum(launches)} |")
    return "\n".join(lines) + "\n"


def halves_table(folders: list[Path], workloads: set[str] | None, sweeps: str = "measured") -> str:
    """The rounds' launches per workload, series and size: the halves' ratio, and how many launches named a
    straggler and how many named one in the upper half."""
    lines = [
        "| workload | series | ranks | launches | upper half / lower half: median (range) | straggler named, "
        "in the upper half |",
        "|---|---|---|---|---|---|",
    ]
    for (workload, mode, n), launches in sorted(halves(folders, workloads, sweeps).items()):
        ratios = [r for r, _, _ in launches]
        named = sum(x for _, x, _ in launches)
        upper = sum(x for _, _, x in launches)
        lines.append(f"| {workload} | {mode} | {n} | {len(launches)} | {spread(ratios)} | {named}, {upper} |")
    return "\n".join(lines) + "\n"


def table(how: str, folders: list[Path], workloads: set[str] | None = None, sweeps: str = "measured") -> str:
    """One of the tool's tables as markdown: ``rounds`` (the rounds' halves), ``reports`` (halves_design.sh's
    launches), ``told`` (per folder) or ``told-total`` (summed over the folders)."""
    if how == "reports":
        return reports_table(folders, workloads)
    if how in ("told", "told-total"):
        return told_table(folders, workloads, total=how == "told-total")
    if how == "rounds":
        return halves_table(folders, workloads, sweeps)
    raise ValueError(f"unknown table {how!r}: rounds, reports, told or told-total")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument(
        "--reports", action="store_true", help="the folders hold bench/tools/halves_design.sh's launches"
    )
    parser.add_argument("--told", action="store_true", help="how often the findings tell a launch's history")
    parser.add_argument("--total", action="store_true", help="with --told: summed over the folders")
    parser.add_argument("--workloads", help="comma-separated workloads (default: all)")
    parser.add_argument("--sweeps", choices=("measured", "fit"), default="measured", help="the target's or the fit's")
    args = parser.parse_args()
    workloads = set(args.workloads.split(",")) if args.workloads else None
    how = "reports" if args.reports else ("told-total" if args.total else "told") if args.told else "rounds"
    print(table(how, args.folders, workloads, args.sweeps), end="")


if __name__ == "__main__":
    main()

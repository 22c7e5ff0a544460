"""python -m bench list | run SUITE... --out DIR | merge SRC DST | recheck DIR | report [--check]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

GPU_MINUTES = 7.0  # bench run gpu's default --max-minutes: no case starts after it, the longest takes under 3


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m bench", description="spmd's benchmark runner and report")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the suites and their cases")
    run = sub.add_parser("run", help="run suites: raw records and a manifest per suite under --out")
    run.add_argument("suites", nargs="+", help="suite names, or gpu (every GPU suite), cpu (what runs without one)")
    run.add_argument("--out", required=True, type=Path, help="output folder (DIR/SUITE/records.jsonl, manifest.json)")
    run.add_argument("--runs", type=int, default=3, help="runs of each case; figures are medians over them (default 3)")
    run.add_argument("--ranks", type=int, help="ranks of multi-rank cases (default: every GPU, or 2 on a CPU)")
    run.add_argument("--quick", action="store_true", help="small sizes: a smoke run (tests, CI), not for the docs")
    run.add_argument(
        "--only",
        metavar="TEXT",
        action="append",
        help="only the case named TEXT, or where none is, the cases whose name holds TEXT (given again: either)",
    )
    run.add_argument(
        "--max-minutes",
        type=float,
        help=f"skip the cases that would start after this many minutes (gpu: {GPU_MINUTES:g}, so that the run, its "
        "longest case included, ends within one 10-minute call; skipped cases are named in the manifest)",
    )
    merge = sub.add_parser(
        "merge", help="a suite's folder from another machine into docs/results (its cases replace or join DST's)"
    )
    merge.add_argument("src", type=Path, help="the suite's folder as bench run wrote it there (OUT/SUITE)")
    merge.add_argument("dst", type=Path, help="the suite's results folder here (docs/results/KIND/SUITE)")
    merge.add_argument(
        "--add-runs", action="store_true", help="SRC's runs join DST's records of the same cases instead of replacing"
    )
    recheck = sub.add_parser(
        "recheck", help="a predict suite's records derived again from their inputs (DIR/inputs) with today's model"
    )
    recheck.add_argument("folder", type=Path, help="the suite's results folder (docs/results/KIND/predict)")
    report = sub.add_parser("report", help="render docs/benchmarks.md and README's results from docs/results")
    report.add_argument("--check", action="store_true", help="render in memory; exit 1 if a document differs")
    args = parser.parse_args(argv)
    if args.command == "list":
        from .suites import suites

        for name, module in suites().items():
            print(f"{name}: {(module.__doc__ or '').strip().splitlines()[0]}")
        return 0
    if args.command == "run":
        from .runner import run as run_suites

        minutes = args.max_minutes if args.max_minutes or "gpu" not in args.suites else GPU_MINUTES
        return run_suites(args.suites, args.out, args.runs, args.quick, args.ranks, argv, args.only, minutes)
    if args.command == "merge":
        from spmd.core.errors import InputError

        from .merge import merge as merge_suite

        try:
            count = merge_suite(args.src, args.dst, args.add_runs)
        except InputError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(f"bench merge: {count} record(s) of {args.src} into {args.dst}")
        return 0
    if args.command == "recheck":
        from .suites.predict import recheck as recheck_records

        print(f"{recheck_records(args.folder)} record(s) of {args.folder} derived again from their inputs")
        return 0
    from .report import render

    return render(check=args.check)


if __name__ == "__main__":
    sys.exit(main())

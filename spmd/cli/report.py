"""``spmd report compare | render | merge``: read reports spmd wrote, never run anything."""

from __future__ import annotations

from ..core.errors import one_line
from .scale import note_no_plots


def add_parser(sub) -> None:
    """``spmd report``'s subcommands and their flags."""
    report = sub.add_parser("report", help="compare or re-render written reports (no MPI launch needed)")
    rsub = report.add_subparsers(dest="report_command", required=True)
    cmp = rsub.add_parser("compare", help="per size and phase change between two report.json/scaling.json")
    cmp.add_argument("old", help="the earlier report.json or scaling.json")
    cmp.add_argument("new", help="the later one, of the same kind")
    cmp.add_argument(
        "--fail-above", type=float, metavar="PCT", help="exit 1 when a phase got slower by more than PCT percent"
    )
    cmp.add_argument(
        "--min-seconds",
        type=float,
        default=1e-4,
        metavar="S",
        help="phases under S seconds in both reports never fail (noise; default 1e-4)",
    )
    cmp.set_defaults(handler=cmd_report_compare)
    merge = rsub.add_parser(
        "merge",
        help="combine the report.json of separate jobs (one per node count) into "
        "one scaling report, as spmd scale writes it",
    )
    merge.add_argument("reports", nargs="+", metavar="REPORT", help="report.json files (or folders holding one)")
    merge.add_argument("--out", metavar="DIR", required=True, help="output folder")
    merge.add_argument("-q", "--quiet", action="store_true", help="no summary")
    merge.set_defaults(handler=cmd_report_merge)
    render = rsub.add_parser(
        "render",
        help="rewrite scaling.md, scaling.html and the plots from scaling.json, or report.html from a report.json",
    )
    render.add_argument(
        "scaling",
        metavar="JSON",
        help="a scaling.json (spmd scale or spmd report merge wrote it) or a report.json (spmd run)",
    )
    render.add_argument("--out", metavar="DIR", help="output folder (default: the folder of JSON)")
    render.add_argument(
        "--reanalyse", action="store_true", help="recompute figures, model and advice from the stored runs first"
    )
    render.set_defaults(handler=cmd_report_render)


def cmd_report_compare(args) -> int:
    from ..report.compare import compare_files, format_compare

    rows, slower = compare_files(args.old, args.new, args.fail_above, args.min_seconds)
    print(format_compare(rows, slower, args.fail_above), flush=True)
    return 1 if slower else 0


def cmd_report_render(args) -> int:
    from pathlib import Path

    from ..report.schema import check_scaling, read_json
    from ..scale.render.write import require_scaling_outputs, write_scaling

    data = read_json(args.scaling, "a scaling.json or report.json")
    if isinstance(data, dict) and data.get("kind") != "scaling" and "timings" in data:
        from ..core.files import require_replaceable, write_text_atomic
        from ..report.build import completed
        from ..report.html import run_html
        from ..report.schema import check_report

        report = completed(check_report(data, args.scaling))
        target = Path(args.out or Path(args.scaling).parent) / "report.html"
        require_replaceable(target, "the report", fix="remove it or choose another --out")
        write_text_atomic(target, run_html(report))
        print(f"wrote {one_line(target)}", flush=True)
        return 0
    scaling = check_scaling(data, args.scaling)
    require_scaling_outputs(args.out or Path(args.scaling).parent)
    if args.reanalyse:
        from ..scale.sweep.analysis import reanalyse

        scaling = reanalyse(scaling)
    paths = write_scaling(scaling, args.out or Path(args.scaling).parent)
    print(f"wrote {', '.join(one_line(p) for p in paths)}", flush=True)
    note_no_plots()
    return 0


def cmd_report_merge(args) -> int:
    import glob
    from pathlib import Path

    from ..core.errors import InputError
    from ..scale.render.write import require_scaling_outputs, write_scaling
    from ..scale.sweep.merge import merge_reports

    if len(args.reports) == 1 and glob.has_magic(args.reports[0]) and not Path(args.reports[0]).exists():
        # a shell glob that matched nothing reaches spmd as it was typed
        raise InputError(f"no report.json matched {one_line(args.reports[0])[:200]}")
    paths = [Path(p) / "report.json" if Path(p).is_dir() else Path(p) for p in args.reports]
    require_scaling_outputs(args.out)
    scaling = merge_reports(paths)
    written = write_scaling(scaling, args.out)
    if not args.quiet:
        print(
            "\n".join(
                ["findings:"]
                + [f"  - {one_line(line)}" for line in scaling["advice"]]
                + ["", f"wrote {len(written)} file(s) to {one_line(args.out)}: " + ", ".join(p.name for p in written)]
            ),
            flush=True,
        )
    note_no_plots()
    return 0

"""``spmd report compare | render | merge``: read reports spmd wrote, never run anything."""

from __future__ import annotations

from ..core.errors import one_line
from .scale import note_no_plots


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

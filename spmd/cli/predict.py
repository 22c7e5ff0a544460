"""``spmd predict SCALING.json --target T``: the sweep's model on machines it did not run on (no MPI launch)."""

from __future__ import annotations

from ..core.errors import one_line
from .scale import note_no_plots


def add_parser(sub) -> None:
    """``spmd predict``'s flags."""
    pred = sub.add_parser(
        "predict",
        help="a sweep's model on machines it did not run on: more GPUs, more nodes, other links (no MPI launch)",
    )
    pred.add_argument("scaling", metavar="SCALING_JSON", help="the scaling.json of a sweep (spmd scale wrote it)")
    pred.add_argument(
        "--target",
        action="append",
        metavar="TARGET",
        help="a machine: a YAML file or key=value,... (keys gpus_per_node, nodes, links, intra, inter, nics, name; "
        "docs/scaling.md); repeat for several",
    )
    pred.add_argument(
        "--measured",
        action="append",
        metavar="REPORT",
        help="a report.json (or a sweep's scaling.json) measured on the target: the prediction beside it, with "
        "its error (repeatable)",
    )
    pred.add_argument(
        "--out",
        metavar="DIR",
        help="where the report with its 'on other machines' goes (default: the folder of SCALING_JSON)",
    )
    pred.add_argument("-q", "--quiet", action="store_true", help="no table")
    pred.set_defaults(handler=cmd_predict)


def cmd_predict(args) -> int:
    from pathlib import Path

    from ..core.errors import ConfigError
    from ..scale.decision.prediction_words import format_prediction, input_words
    from ..scale.prediction.check import check_against, measured_runs
    from ..scale.prediction.machines import read_target
    from ..scale.prediction.predict import predict_machine, read_sweep
    from ..scale.render.write import require_scaling_outputs, write_scaling

    scaling = read_sweep(args.scaling)
    if not args.target:
        raise ConfigError("--target: name at least one machine (a YAML file or key=value,...)")
    machines = [read_target(spec) for spec in args.target]
    measured = [run for path in args.measured or [] for run in measured_runs(path)]
    out = Path(args.out or Path(args.scaling).parent)
    require_scaling_outputs(out)
    predictions = []
    for machine in machines:
        p = predict_machine(scaling, machine)
        p["checked"] = check_against(p, measured)
        p["priced_from"] = input_words(p["target"])  # the kind of input, a level at a time
        predictions.append(p)
    scaling = {**scaling, "other_machines": predictions}
    paths = write_scaling(scaling, out)
    if not args.quiet:
        print(format_prediction(scaling), flush=True)
        print(f"wrote {len(paths)} file(s) to {one_line(out)}: " + ", ".join(p.name for p in paths), flush=True)
    note_no_plots()
    return 0

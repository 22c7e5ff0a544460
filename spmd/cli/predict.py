"""``spmd predict SCALING.json --target T``: the sweep's model on machines it did not run on (no MPI launch)."""

from __future__ import annotations

from ..core.errors import one_line
from .scale import note_no_plots


def cmd_predict(args) -> int:
    from pathlib import Path

    from ..core.errors import ConfigError
    from ..scale.decision.prediction_words import format_prediction
    from ..scale.prediction.machines import read_target
    from ..scale.prediction.predict import check_against, measured_runs, predict_machine, read_sweep
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
        predictions.append(p)
    scaling = {**scaling, "other_machines": predictions}
    paths = write_scaling(scaling, out)
    if not args.quiet:
        print(format_prediction(scaling), flush=True)
        print(f"wrote {len(paths)} file(s) to {one_line(out)}: " + ", ".join(p.name for p in paths), flush=True)
    note_no_plots()
    return 0

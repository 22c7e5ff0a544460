"""``spmd jobscript CONFIG``: the sbatch files of a strong/weak series and submit.sh."""

from __future__ import annotations

from ..core.errors import one_line


def cmd_jobscript(args) -> int:
    from ..scale.jobscript import JobOptions, parse_nodes, series_summary, write_jobscripts
    from ..workloads.registry import load_job_config

    cfg = load_job_config(args.config, args.override)
    out = args.out or f"{cfg.output}/jobs"
    nodes, modes = parse_nodes(args.nodes), ("strong", "weak") if args.mode == "both" else (args.mode,)
    options = JobOptions(
        args.gpus_per_node,
        args.tasks_per_node,
        args.cpus_per_task,
        args.partition,
        args.account,
        args.time,
        args.mpi,
        args.spmd,
        tuple(args.prologue),
        tuple(args.env),
    )
    written = write_jobscripts(cfg, args.config, nodes, out, options, modes)
    print(
        f"wrote {len(written)} file(s) to {one_line(out)}; submit them with: bash {one_line(out)}/submit.sh\n"
        f"  {series_summary(nodes, modes)}",
        flush=True,
    )
    return 0

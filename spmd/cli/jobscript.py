"""``spmd jobscript CONFIG``: the sbatch files of a strong/weak series and submit.sh; ``spmd srun-mpi``: the
srun MPI plugin those scripts start their runs with, chosen where the job runs."""

from __future__ import annotations

from ..core.errors import one_line


def cmd_jobscript(args) -> int:
    from ..scale.jobscript import JobOptions, parse_nodes, series_summary, write_jobscripts
    from ..workloads.registry import load_job_config

    cfg = load_job_config(args.config, args.override)
    out = args.out or f"{cfg.output}/jobs"
    nodes, modes = parse_nodes(args.nodes), ("strong", "weak") if args.mode == "both" else (args.mode,)
    options = JobOptions(
        gpus_per_node=args.gpus_per_node,
        tasks_per_node=args.tasks_per_node,
        cpus_per_task=args.cpus_per_task,
        partition=args.partition,
        account=args.account,
        time=args.time,
        mpi=args.mpi,
        spmd=args.spmd,
        prologue=tuple(args.prologue),
        env=tuple(args.env),
        cpu_partition=args.cpu_partition,
        cpu_time=args.cpu_time,
    )
    written = write_jobscripts(cfg, args.config, nodes, out, options, modes)
    print(
        f"wrote {len(written)} file(s) to {one_line(out)}; submit them with: bash {one_line(out)}/submit.sh\n"
        f"  {series_summary(nodes, modes)}",
        flush=True,
    )
    return 0


def cmd_srun_mpi(args) -> int:
    """One line, PLUGIN (or - for the cluster's default) and the reason, tab-separated: what a job script reads."""
    from ..core.srun import local_choice

    plugin, why = local_choice()
    print(f"{plugin or '-'}\t{one_line(why)}", flush=True)
    return 0

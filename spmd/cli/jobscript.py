"""``spmd jobscript CONFIG``: the sbatch files of a strong/weak series and submit.sh; ``spmd srun-mpi``: the
srun MPI plugin those scripts start their runs with, chosen where the job runs."""

from __future__ import annotations

from ..core.errors import one_line
from .arguments import with_config


def add_parser(sub) -> None:
    """``spmd jobscript``'s flags, and ``spmd srun-mpi``."""
    job = with_config(
        sub.add_parser(
            "jobscript", help="sbatch files of a strong/weak series across node counts, and submit.sh (no MPI)"
        )
    )
    job.add_argument("--nodes", required=True, metavar="N,N,...", help="node counts, e.g. 1,2,4")
    job.add_argument("--gpus-per-node", type=int, required=True, metavar="G", help="GPUs per node (0: a CPU series)")
    job.add_argument("--tasks-per-node", type=int, metavar="T", help="ranks per node (default: one per GPU)")
    job.add_argument(
        "--mode",
        choices=("strong", "weak", "both"),
        default="both",
        help="strong: the config's problem at every node count; weak: it grows with the nodes; both: the "
        "two series, whose run at the smallest node count is one job (default both)",
    )
    job.add_argument("--partition", help="#SBATCH --partition of every job (default: the cluster's)")
    job.add_argument("--account", help="#SBATCH --account of every job (default: none given)")
    job.add_argument("--time", default="00:30:00", help="each run's time limit (default 00:30:00)")
    job.add_argument(
        "--cpu-partition",
        metavar="PARTITION",
        help="#SBATCH --partition of the generate and merge jobs, which use one CPU and no GPU (default: --partition)",
    )
    job.add_argument(
        "--cpu-time", default="00:10:00", help="the generate and merge jobs' time limit (default 00:10:00)"
    )
    job.add_argument(
        "--mpi",
        default="auto",
        metavar="PLUGIN",
        help="srun's --mpi plugin (a name `srun --mpi=list` shows: pmix, pmi2, ...); auto: chosen when each job "
        "starts from what its srun offers and the MPI library the ranks load (Open MPI 5 speaks only PMIx; "
        "MPICH PMI-2), and said in its log (default auto)",
    )
    job.add_argument(
        "--spmd",
        metavar="COMMAND",
        help="how the jobs call spmd (default: this Python with -m spmd, so a virtual environment's "
        "spmd is the one the jobs run)",
    )
    job.add_argument(
        "--cpus-per-task",
        type=int,
        metavar="C",
        help="CPUs of each rank, for its reader threads and BLAS (default: a rank's share of a node's CPUs, as "
        "sinfo says, or the config's io.threads where smaller; the scripts say which)",
    )
    job.add_argument(
        "--prologue",
        action="append",
        default=[],
        metavar="FILE",
        help="shell lines every job runs first, e.g. module load ... (repeatable)",
    )
    job.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a variable every job exports, e.g. NCCL_DEBUG=WARN or OMP_NUM_THREADS=4 (repeatable)",
    )
    job.add_argument("--out", metavar="DIR", help="output folder (default: <config output>/jobs)")
    job.set_defaults(handler=cmd_jobscript)

    srun_mpi = sub.add_parser(
        "srun-mpi",
        help="the srun --mpi plugin this node's srun and MPI library call for, and why (the job scripts of "
        "spmd jobscript run it; starts no MPI)",
    )
    srun_mpi.set_defaults(handler=cmd_srun_mpi)


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

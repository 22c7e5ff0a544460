"""``spmd generate CONFIG``: a config's inputs, written once (by one process, or by every rank)."""

from __future__ import annotations

from ..core.errors import one_line
from .arguments import with_config


def add_parser(sub) -> None:
    """``spmd generate``'s flags."""
    gen = with_config(sub.add_parser("generate", help="write the input files a config names"))
    gen.add_argument("--force", action="store_true", help="rewrite files spmd generated that are already up to date")
    gen.add_argument(
        "--skip-user-files",
        action="store_true",
        help="leave files spmd did not generate as they are (they are read as they are) instead of "
        "refusing them: a job script's generate step",
    )
    gen.set_defaults(handler=cmd_generate)


def cmd_generate(args) -> int:
    from ..core.launch import mpi_missing
    from ..io.generate import plan_inputs, write_inputs
    from ..workloads.registry import load_job_config, workload_class

    def say(plan, written):
        print(
            f"spmd generate: wrote {len(written)} of {plan.total} file(s)"
            + (f", {len(plan.current)} already up to date" if plan.current else "")
            + (f", {len(plan.users)} of yours left as they are" if plan.users else "")
            + (f", {len(plan.not_made)} not made (their input holds files of yours)" if plan.not_made else ""),
            flush=True,
        )
        for path in written:
            print(f"  {one_line(path)}")

    if mpi_missing():  # one process writes everything (under mpiexec the ranks share the files)
        cfg = load_job_config(args.config, args.override)
        workload = workload_class(cfg.workload)
        plan = plan_inputs(cfg, workload, args.force, args.skip_user_files)
        say(plan, write_inputs(plan, workload))
        return 0
    from ..core.runtime import Context
    from ..workloads.registry import agree_on_config

    with Context(watchdog=True) as ctx:
        cfg = agree_on_config(ctx, args.config, args.override)
        workload = workload_class(cfg.workload)
        # every file checked (a user's refused, the space there) before any rank writes one
        plan = ctx.agree(plan_inputs, cfg, workload, args.force, args.skip_user_files, root_only=True)
        written = ctx.agree(write_inputs, plan, workload, ctx.rank, ctx.size)
        written = [p for part in ctx.comm.gather(written, root=0) or [] for p in part]
        if ctx.rank == 0:
            say(plan, written)
    return 0

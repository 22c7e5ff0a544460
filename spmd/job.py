"""One ``spmd run``: bind devices, open the communicator, run, verify, report."""

from __future__ import annotations

from pathlib import Path

from .comm import open_communicator
from .errors import SpmdError
from .report import build_report, write_json_atomic
from .timing import PhaseTimer
from .workloads import workload_class


def run_job(ctx, cfg, out_dir: str | Path) -> tuple[dict, Path]:
    """Run ``cfg`` on every rank of ``ctx`` and write ``out_dir/report.json`` on rank 0.

    The report is written only after the result is verified, so a failed run leaves none.

    Returns:
        (the report, its path), on every rank.
    """
    ctx.bind_device(cfg.device, cfg.allow_shared_gpu)
    comm = open_communicator(ctx, cfg.comm)
    workload = workload_class(cfg.workload)()
    try:
        workload.setup(ctx, cfg, comm)
        timer = PhaseTimer(ctx.xp)
        for i in range(cfg.warmup + cfg.repeats):
            workload.prepare()
            timer.start_repeat()
            workload.run(timer)
            timer.end_repeat(record=i >= cfg.warmup)
        verification = workload.verify()
        records = ctx.comm.gather(timer.records, root=0)
        nodes = ctx.layout()
        path = Path(out_dir) / "report.json"

        def write():
            report = build_report(cfg=cfg, ctx=ctx, comm_name=comm.name, records_by_rank=records,
                                  nodes=nodes, verification=verification, result=workload.result(),
                                  metrics_fn=workload.metrics)
            write_json_atomic(path, report)
            return report

        report = ctx.agree(write, root_only=True)
    except SpmdError as exc:
        if exc.collective:  # every rank is here: safe to release collective resources
            _release(workload, comm)
        raise
    # Any other exception skips the release: peers may be stuck in a collective, and the
    # CLI aborts the whole job anyway.
    _release(workload, comm)
    return report, path


def _release(workload, comm) -> None:
    workload.close()
    comm.close()

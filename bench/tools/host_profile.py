"""Where a run's host time goes: ``spmd run CONFIG`` in this process under cProfile, on every rank; rank 0
prints the functions that took most time of their own, and those of spmd's repeat loop by cumulative time.
For a question like: why does a plug-in spend more host time per repeat in compute + comm than the same calls
by hand, before the kernels start?

    mpirun -n 2 python -m bench.tools.host_profile CONFIG -o repeats=200 > profile.txt
"""

from bench.usage import answer_help

answer_help(
    __doc__, "mpirun -n N python -m bench.tools.host_profile CONFIG [-o key=value ...]"
)  # before the libraries a machine may lack

import cProfile
import io
import pstats
import sys

from spmd.core.runtime import Context
from spmd.job import run_job
from spmd.workloads.registry import load_job_config


def main(argv: list[str]) -> int:
    config, overrides = argv[0], [a for i, a in enumerate(argv[1:]) if argv[i] == "-o"]
    with Context() as ctx:
        cfg = ctx.agree(load_job_config, config, overrides)
        profile = cProfile.Profile()
        profile.enable()
        job = run_job(ctx, cfg)
        profile.disable()
        if ctx.rank == 0:
            out = io.StringIO()
            stats = pstats.Stats(profile, stream=out)
            repeats = cfg.warmup + cfg.repeats
            print(
                f"# {cfg.workload}, {ctx.size} rank(s), {repeats} repeats; report timings (median ms): "
                + ", ".join(f"{k} {v['median'] * 1e3:.3f}" for k, v in job.report["timings"].items())
            )
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(r"spmd/(workloads|comm|timing|io|faults|waits)", 40)
            print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

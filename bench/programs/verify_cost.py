"""What matmul's default check (grouped Freivalds, spmd.workloads.matmul.check) costs beside the GEMM it checks,
on one device: the float32 GEMM C = A @ B and the check of C, each timed (device synchronized) RUNS times.

    mpiexec -n 1 python bench/programs/verify_cost.py --sizes 4096,8192,16384   # GPU when CuPy sees one

Prints one JSON line: per size, the GEMM's and the check's seconds of every run and their medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
from mpi4py import MPI

from spmd.core import xp as xpmod
from spmd.core.runtime import Context
from spmd.io.plan import Block
from spmd.workloads.matmul import check

RUNS = 5


def timed(xp, fn) -> float:
    xpmod.synchronize(xp)
    start = time.perf_counter()
    fn()
    xpmod.synchronize(xp)
    return time.perf_counter() - start


def measure(ctx, xp, n: int) -> dict:
    rng = np.random.default_rng(n)
    a = xp.asarray(rng.standard_normal((n, n), dtype=np.float32))
    b = xp.asarray(rng.standard_normal((n, n), dtype=np.float32))
    c = a @ b  # the warm-up GEMM, and the result the check reads
    whole = Block(0, n, 0, n)
    blocks, local = {"a": whole, "b": whole, "c": whole}, {"a": a, "b": b, "c": c}
    tol = check.tau("float32", n, False)
    check.freivalds(ctx, xp, (n, n, n), blocks, local, 0, tol)  # warm-up
    gemm = [timed(xp, lambda: a @ b) for _ in range(RUNS)]
    verify = [timed(xp, lambda: check.freivalds(ctx, xp, (n, n, n), blocks, local, 0, tol)) for _ in range(RUNS)]
    return {
        "n": n,
        "groups": min(n, check.FREIVALDS_GROUPS),
        "gemm_s": gemm,
        "check_s": verify,
        "gemm_median_s": statistics.median(gemm),
        "check_median_s": statistics.median(verify),
        "check_over_gemm": statistics.median(verify) / statistics.median(gemm),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096,8192,16384")
    args = parser.parse_args()
    with Context(MPI.COMM_SELF) as ctx:
        ctx.bind_device("auto")
        rows = [measure(ctx, ctx.xp, int(n)) for n in args.sizes.split(",")]
    print(json.dumps({"device": ctx.device_name, "runs": RUNS, "rows": rows}), flush=True)


if __name__ == "__main__":
    main()

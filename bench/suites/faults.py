"""Failure: every case of the catalogue (bench/failures/), each run as a user would. It records the exit code, the
time to exit against the bound (timeout_s + 30 s) and the message; docs/reliability.md's table is rendered from
these. On a GPU it also measures what matmul's default check costs beside the GEMM it checks."""

from __future__ import annotations

import json
import shlex

import numpy as np

from ..env import CaseFailed, launcher
from ..failures import catalogue, injected
from ..failures.case import TIMEOUT_S, run_case, write_dataset
from ..records import Measure
from . import Case

BOUND_S = TIMEOUT_S + 30


def to_run(env) -> list:
    """Every case on a CPU machine; on a GPU machine the injected faults alone (the device's phases, buffers and
    NCCL): bad inputs, configs and hostile values are refused before a device is touched, so the CPU machine's
    table already answers for them, and 87 launches would not fit beside the other GPU suites in one call."""
    mpiexec = launcher()
    if env.gpus:
        return injected.cases(env.ranks, True)
    return catalogue.every_case(env.ranks, False, mpiexec)


def one(env, case) -> list[Measure]:
    folder = env.work / "faults"
    if not (folder / "x.h5").exists():
        folder.mkdir(exist_ok=True)
        write_dataset(folder / "x.h5", np.random.default_rng(0).standard_normal(30_000).astype(np.float32))
    row = run_case(folder, launcher(), env.ranks, env.device, case)
    if not row["ok"]:
        raise CaseFailed(
            f"exit {row['exit']} in {row['seconds']} s, report left {row['report_left']}, "
            f"{row['problem'] or ''}: {row['message']}"
        )
    params = {
        "fault": row["fault"],
        "exit": row["exit"],
        "message": row["message"],
        "ranks": env.ranks,
        "launcher": shlex.join(launcher()[:1]),
    }
    return [
        Measure(case.name, "spmd", row["seconds"], "time to exit", "s", better="lower", params=params),
        Measure(case.name, "bound (timeout_s + 30 s)", BOUND_S, "time to exit", "s", "ceiling", "lower"),
    ]


def verify_cost(env) -> list[Measure]:
    sizes = "2048,4096" if env.quick else "8192,16384"
    out = json.loads(env.program("verify_cost.py", "--sizes", sizes, ranks=1).stdout.strip().splitlines()[-1])
    measures = []
    for row in out["rows"]:
        case = f"matmul's check of C = A @ B, n = {row['n']} float32"
        measures += [
            Measure(case, "grouped Freivalds check", row["check_median_s"], "time", "s", better="lower"),
            Measure(case, "the GEMM it checks", row["gemm_median_s"], "time", "s", "peer", "lower"),
        ]
    return measures


def cases(env) -> list[Case]:
    # the injected faults strike rank 1 (or every rank): they need two ranks
    rows = [Case(c.name, lambda e, c=c: one(e, c), runs=1, needs=("ranks2",) if c.fault else ()) for c in to_run(env)]
    return [*rows, Case("matmul's check against its GEMM", verify_cost, needs=("gpu",))]

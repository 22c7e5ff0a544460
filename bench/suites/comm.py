"""Collectives: ``spmd bench comm`` over every backend that runs here (nccl, host-staged mpi; mpi-cuda in the
cuda-mpi suite), every result checked, in nccl-tests' units, beside PyTorch's allreduce (NCCL on GPUs, gloo on
CPUs) at the same sizes in the same run. Bus bandwidth at the largest size, time at the smallest."""

from __future__ import annotations

import json

from spmd.core.units import fmt_bytes

from ..records import Measure
from . import Case

OPS = ("allreduce", "allgather", "reduce_scatter", "bcast", "sendrecv")


def sizes(env) -> tuple[int, int]:
    if env.quick:
        return 8, 1 << 20
    return 8, (1 << 30 if env.gpus else 64 << 20)


def spmd_comm(env, op: str) -> dict:
    small, large = sizes(env)
    out = env.work / f"comm-{op}.json"
    iters = 20 if env.gpus else 10
    args = ["--op", op, "--backend", "all", "--min-bytes", small, "--max-bytes", large, "--factor", 32]
    env.spmd("bench", "comm", *args, "--iters", iters, "--warmup", 5, "--json", out, ranks=env.ranks)
    return json.loads(out.read_text())


def measures(case: str, backend: str, rows: list[dict], role: str) -> list[Measure]:
    first, last = rows[0], rows[-1]
    return [
        Measure(f"{case}, {fmt_bytes(last['size'])}", backend, last["busbw_GBps"], "bus bandwidth", "GB/s", role),
        Measure(f"{case}, {fmt_bytes(first['size'])}", backend, first["time_us"], "time", "us", role, better="lower"),
    ]


def allreduce(env) -> list[Measure]:
    """spmd's allreduce on each backend against PyTorch's at the same sizes."""
    case = f"allreduce, {env.ranks} ranks"
    out = other(env, "allreduce")
    small, large = sizes(env)
    sweep = ["--min-bytes", small, "--max-bytes", large, "--factor", 32, "--iters", 20 if env.gpus else 10]
    torch = json.loads(env.program("torch_allreduce.py", *sweep, ranks=env.ranks).stdout.strip().splitlines()[-1])
    rows = torch["results"]
    out += measures(case, f"PyTorch {torch['backend']}", rows, "ceiling" if env.gpus else "peer")
    return out


def other(env, op: str) -> list[Measure]:
    """``op`` on every backend that runs here, each checked (a wrong element fails the case)."""
    result = spmd_comm(env, op)
    out = []
    for backend, rows in result["results"].items():
        if any(r["wrong"] for r in rows):
            raise RuntimeError(f"{backend}: {sum(r['wrong'] for r in rows)} wrong element(s)")
        role = "result" if backend == ("nccl" if env.gpus else "mpi") else "peer"
        out += measures(f"{op}, {env.ranks} ranks", f"spmd {backend}", rows, role)
    return out


def cases(env) -> list[Case]:
    out = [Case("allreduce against PyTorch", allreduce, needs=("ranks2", "torch"))]
    out += [Case(op, lambda e, op=op: other(e, op), needs=("ranks2",)) for op in OPS[1:]]
    return out

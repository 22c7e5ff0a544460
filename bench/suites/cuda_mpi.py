"""A CUDA-aware MPI (built by bench/cuda-mpi/build.sh) through spmd's mpi-cuda backend against NCCL and host-staged
MPI, device buffers, every result checked, in nccl-tests' units. Run with SPMD_MPIEXEC set to that MPI's mpirun
and SPMD_CUDA_MPI=1 (its mpi4py first on PYTHONPATH: bench/cuda-mpi/build.sh writes env.sh)."""

from __future__ import annotations

import json

from ..records import Measure
from . import Case
from .comm import measures

OPS = ("allreduce", "allgather", "bcast", "sendrecv")


def op(env, name: str) -> list[Measure]:
    out = env.work / f"cuda-mpi-{name}.json"
    env.spmd(
        "bench",
        "comm",
        "--op",
        name,
        "--backend",
        "all",
        "--device",
        "gpu",
        "--min-bytes",
        8,
        "--max-bytes",
        (1 << 20) if env.quick else (128 << 20),
        "--factor",
        16,
        "--iters",
        10,
        "--warmup",
        2,
        "--json",
        out,
        ranks=env.ranks,
    )
    result = json.loads(out.read_text())
    if "mpi-cuda" not in result["results"]:
        raise RuntimeError(f"mpi-cuda did not run: {result.get('skipped')}")
    roles = {"mpi-cuda": "result", "nccl": "peer", "mpi": "peer"}
    return [
        m
        for backend, rows in result["results"].items()
        for m in measures(f"{name}, {env.ranks} GPUs", f"spmd {backend}", rows, roles.get(backend, "peer"))
    ]


def cases(env) -> list[Case]:
    return [Case(name, lambda e, name=name: op(e, name), needs=("gpu", "ranks2", "cuda-mpi")) for name in OPS]

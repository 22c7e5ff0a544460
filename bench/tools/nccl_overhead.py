"""Where the time of a small NCCL allreduce goes: host enqueue cost against GPU latency.

Under mpirun -n 2 (one rank per GPU). Prints, per variant, microseconds per call of the host
loop alone (no synchronize) and of the loop followed by a synchronize.
"""

from __future__ import annotations

from bench.usage import answer_help

answer_help(
    __doc__, "mpirun -n 2 python -m bench.tools.nccl_overhead (one rank per GPU, CuPy)"
)  # before the libraries a machine may lack

import time

import cupy
import numpy as np
from cupy.cuda import nccl

from spmd.comm.factory import open_communicator
from spmd.core.runtime import Context
from spmd.measure.collectives import call

ITERS = 5000


def per_call(fn, sync: bool, comm) -> float:
    comm.barrier()
    start = time.perf_counter()
    for _ in range(ITERS):
        fn()
    if sync:
        cupy.cuda.get_current_stream().synchronize()
    mine = (time.perf_counter() - start) / ITERS
    cupy.cuda.get_current_stream().synchronize()
    return float(comm.allreduce(np.array([mine]), op="max")[0]) * 1e6


def main() -> None:
    ctx = Context()
    ctx.bind_device("gpu")
    comm = open_communicator(ctx, "nccl")
    raw = comm.comm
    x = cupy.ones(2, dtype=cupy.float32)
    y = cupy.empty_like(x)
    stream = cupy.cuda.get_current_stream().ptr
    variants = {
        "raw ncclAllReduce, fixed buffers": lambda: raw.allReduce(
            x.data.ptr, y.data.ptr, 2, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream
        ),
        "raw + cupy.empty_like output": lambda: raw.allReduce(
            x.data.ptr, cupy.empty_like(x).data.ptr, 2, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream
        ),
        "spmd NCCLCommunicator.allreduce": lambda: comm.allreduce(x),
        "spmd allreduce(x, out=y)": lambda: comm.allreduce(x, out=y),
        "spmd bench call() (out=y)": lambda: call(comm, "allreduce", x, y),
    }
    for _ in range(2000):
        comm.allreduce(x)
    for name, fn in variants.items():
        host = per_call(fn, False, comm)
        synced = per_call(fn, True, comm)
        if ctx.rank == 0:
            print(f"{name:<36} host {host:6.2f} us/call   with sync {synced:6.2f} us/call", flush=True)
    comm.close()


if __name__ == "__main__":
    main()

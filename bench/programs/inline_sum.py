"""reduce's sum written by hand, the way an expert would without spmd: the baseline of "no hidden cost".

Each repeat, like spmd: this rank's rows from the HDF5 file into a (page-locked) host buffer (read), a
barrier (wait), a copy to the GPU (h2d), ``xp.sum(block, dtype=float64)`` (compute) and an NCCL allreduce
(comm; MPI on a CPU). Device phases are CUDA-event timed, host phases with perf_counter, as spmd's timer
does. Prints one JSON line: the median of each phase over the kept repeats, and the sum.

    mpiexec -n 1 python bench/programs/inline_sum.py CONFIG   # a reduce-shaped config, after spmd generate

With ``--idle``, the device is synchronized after the copy, so the sum is launched on an idle stream as in spmd
(whose copies run on their own stream, overlapped with the read): the host's launch time then counts in
``compute`` here too. Without it the sum is queued behind the copy, which hides that time.
"""

from bench.usage import answer_help

answer_help(
    __doc__, "mpiexec -n N python bench/programs/inline_sum.py CONFIG [--idle]"
)  # before the libraries a machine may lack

import json
import statistics
import sys
import time

import h5py
import numpy as np
import yaml
from mpi4py import MPI

try:
    import cupy
    from cupy.cuda import nccl

    GPU = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # no CuPy or no GPU: NumPy and MPI
    GPU = False


def main(config_path: str, idle: bool = False) -> int:
    cfg = yaml.safe_load(open(config_path))
    comm, rank, size = MPI.COMM_WORLD, MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size
    with h5py.File(cfg["input"]["path"], "r") as f:
        rows = f[cfg["input"]["dataset"]].shape[0]
    start, stop = rank * rows // size, (rank + 1) * rows // size
    if GPU:
        local = comm.Split_type(MPI.COMM_TYPE_SHARED).rank  # one GPU per rank of a node, as spmd binds
        cupy.cuda.Device(local % cupy.cuda.runtime.getDeviceCount()).use()
        uid = comm.bcast(nccl.get_unique_id() if rank == 0 else None)
        nc = nccl.NcclCommunicator(size, uid, rank)
        host = cupy.cuda.alloc_pinned_memory((stop - start) * 4)
        host = np.frombuffer(host, np.float32, stop - start)
        device = cupy.empty(stop - start, np.float32)
        total = cupy.empty((), np.float64)
    else:
        host = np.empty(stop - start, np.float32)
    kept = []
    for repeat in range(cfg.get("warmup", 1) + cfg.get("repeats", 5)):
        times = {}
        if GPU:
            cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        with h5py.File(cfg["input"]["path"], "r") as f:
            f[cfg["input"]["dataset"]].read_direct(host, np.s_[start:stop])
        times["read"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        comm.Barrier()
        times["wait"] = time.perf_counter() - t1
        if GPU:
            marks = [cupy.cuda.Event() for _ in range(4)]
            marks[0].record()
            device.set(host)
            if idle:
                cupy.cuda.Device().synchronize()
            marks[1].record()
            cupy.sum(device, dtype=cupy.float64, out=total)
            marks[2].record()
            nc.allReduce(
                total.data.ptr, total.data.ptr, 1, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, cupy.cuda.get_current_stream().ptr
            )
            marks[3].record()
            marks[3].synchronize()
            for name, a, b in (("h2d", 0, 1), ("compute", 1, 2), ("comm", 2, 3)):
                times[name] = cupy.cuda.get_elapsed_time(marks[a], marks[b]) / 1e3
            value = float(total.get())
        else:
            t2 = time.perf_counter()
            local = np.sum(host, dtype=np.float64)
            t3 = time.perf_counter()
            value = comm.allreduce(float(local))
            times.update(compute=t3 - t2, comm=time.perf_counter() - t3)
        times["total"] = time.perf_counter() - t0
        if repeat >= cfg.get("warmup", 1):
            kept.append(times)
    if rank == 0:
        medians = {k: statistics.median(t[k] for t in kept) for k in kept[0]}
        print(
            json.dumps(
                {"ranks": size, "gpu": GPU, "idle": idle, "repeats": len(kept), "sum": value, "median_s": medians}
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "--idle" in sys.argv[2:]))

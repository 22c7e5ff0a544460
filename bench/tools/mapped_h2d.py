"""Can a GPU copy a file's bytes straight out of the page cache? Reduce's weak efficiency at 2 GPUs can be
bounded by the host's page-cache copies: pread moves every byte through the CPU into a pinned buffer (two passes
over host memory) before the DMA reads it (a third). Here each rank maps its own file (mmap, read-only),
page-locks the mapping with cudaHostRegister(ReadOnly) and lets the copy engine read the page-cache pages
directly: one pass, no CPU copy. Measured on every rank at once (1 rank, then all of them), against the
pread-to-pinned path of spmd's direct engine, all from the page cache, medians of ROUNDS:
  - pread:     THREADS threads of pread into a pinned buffer, then one H2D copy (the direct engine's limit)
  - whole:     register the whole mapping, one H2D copy, unregister (each timed)
  - pieces:    PIECE_MB pieces on THREADS threads: register, copy on the thread's stream, wait, unregister

    mpirun -n 2 python -m bench.tools.mapped_h2d DIR GIB_PER_RANK > mapped.json
"""

from bench.usage import answer_help

answer_help(
    __doc__, "mpirun -n N python -m bench.tools.mapped_h2d DIR GIB_PER_RANK (GPUs, CuPy)"
)  # before the libraries a machine may lack

import json
import mmap
import os
import statistics
import sys
import threading
import time

import cupy as cp
import numpy as np
from mpi4py import MPI

REGISTER_READ_ONLY = 8  # cudaHostRegisterReadOnly
H2D = 1  # cudaMemcpyHostToDevice
ROUNDS = int(os.environ.get("ROUNDS", "5"))
THREADS = int(os.environ.get("THREADS", "8"))


def make_file(path: str, nbytes: int) -> None:
    if os.path.exists(path) and os.path.getsize(path) == nbytes:
        return
    block = np.arange(1 << 24, dtype=np.float32).view(np.uint8)
    with open(path, "wb") as f:
        for at in range(0, nbytes, block.nbytes):
            f.write(block[: min(block.nbytes, nbytes - at)])


def warm(path: str) -> None:
    with open(path, "rb") as f:  # into the page cache
        while f.read(1 << 26):
            pass


def timed(comm, fn) -> float:
    """Seconds from a common start to the slowest rank's end; any rank's failure raised on all."""
    comm.Barrier()
    t0 = time.perf_counter()
    error = None
    try:
        fn()
        cp.cuda.Device().synchronize()
    except Exception as exc:
        error = f"rank {comm.rank}: {exc!r}"
    elapsed = time.perf_counter() - t0
    errors = [e for e in comm.allgather(error) if e]
    if errors:
        raise RuntimeError(errors[0])
    return comm.allreduce(elapsed, op=MPI.MAX)


def run_threads(count: int, work) -> None:
    errors = []

    def wrap(i):
        try:
            work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def main() -> None:
    comm = MPI.COMM_WORLD
    out_dir, gib = sys.argv[1], float(sys.argv[2])
    nbytes = int(gib * 2**30)
    cp.cuda.Device(comm.rank % cp.cuda.runtime.getDeviceCount()).use()
    path = os.path.join(out_dir, f"mapped-{comm.rank}.bin")
    make_file(path, nbytes)
    warm(path)
    dev = cp.empty(nbytes, dtype=np.uint8)
    edge = 1 << 20  # the first and last MiB are compared with the file after every copy
    expect = cp.asarray(
        np.concatenate(
            [np.fromfile(path, dtype=np.uint8, count=edge), np.fromfile(path, dtype=np.uint8, offset=nbytes - edge)]
        )
    )
    pinned = cp.cuda.alloc_pinned_memory(nbytes)
    host = np.frombuffer(pinned, dtype=np.uint8, count=nbytes)
    fd = os.open(path, os.O_RDONLY)
    mm = mmap.mmap(fd, nbytes, prot=mmap.PROT_READ, flags=mmap.MAP_SHARED)
    view = np.frombuffer(mm, dtype=np.uint8)
    base = view.ctypes.data
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(THREADS)]
    results: dict[str, list[float]] = {}

    def record(name, seconds):
        results.setdefault(name, []).append(seconds)

    def poison():
        dev[:edge].fill(255)
        dev[-edge:].fill(255)

    def pread_path():
        share = -(-nbytes // THREADS)

        def work(i):
            lo, hi = i * share, min(nbytes, (i + 1) * share)
            mv = memoryview(host)[lo:hi]
            done = 0
            while done < hi - lo:
                done += os.preadv(fd, [mv[done:]], lo + done)

        run_threads(THREADS, work)
        cp.cuda.runtime.memcpy(dev.data.ptr, host.ctypes.data, nbytes, H2D)

    reg_times: list[tuple[float, float, float]] = []

    def whole():
        t0 = time.perf_counter()
        cp.cuda.runtime.hostRegister(base, nbytes, REGISTER_READ_ONLY)
        try:
            t1 = time.perf_counter()
            cp.cuda.runtime.memcpy(dev.data.ptr, base, nbytes, H2D)
            t2 = time.perf_counter()
        finally:
            cp.cuda.runtime.hostUnregister(base)
        reg_times.append((t1 - t0, t2 - t1, time.perf_counter() - t2))

    def pieces(piece_mb):
        piece = piece_mb << 20
        count = -(-nbytes // piece)

        def work(i):
            stream = streams[i]
            for k in range(i * count // THREADS, (i + 1) * count // THREADS):
                lo = k * piece
                size = min(piece, nbytes - lo)
                cp.cuda.runtime.hostRegister(base + lo, size, REGISTER_READ_ONLY)
                try:
                    cp.cuda.runtime.memcpyAsync(dev.data.ptr + lo, base + lo, size, H2D, stream.ptr)
                    stream.synchronize()
                finally:
                    cp.cuda.runtime.hostUnregister(base + lo)

        return lambda: run_threads(THREADS, work)

    ways = {"pread": pread_path, "whole": whole, **{f"pieces{mb}": pieces(mb) for mb in (8, 32, 128)}}
    report = {"gib_per_rank": gib, "ranks": comm.size, "threads": THREADS, "rounds": ROUNDS, "ways": {}}
    for together in sorted({1, comm.size}):
        active = comm.rank < together
        sub = comm.Split(0 if active else MPI.UNDEFINED, comm.rank)
        if active:
            for _ in range(ROUNDS):
                for name, fn in ways.items():
                    poison()
                    reg_times.clear()
                    try:
                        seconds = timed(sub, fn)
                    except Exception as exc:
                        report["ways"].setdefault(f"{together}/{name}", {"error": repr(exc)})
                        continue
                    if not bool((cp.concatenate([dev[:edge], dev[-edge:]]) == expect).all()):
                        report["ways"].setdefault(f"{together}/{name}", {"error": "wrong bytes"})
                        continue
                    record(f"{together}/{name}", seconds)
                    for part, part_s in zip(("register", "copy", "unregister"), reg_times[0] if reg_times else ()):
                        record(f"{together}/whole-{part}", part_s)
            sub.Free()
        comm.Barrier()
    for key, times in results.items():
        med = statistics.median(times)
        together = int(key.split("/")[0])
        report["ways"][key] = {
            "median_s": med,
            "min_s": min(times),
            "max_s": max(times),
            "gbps_per_rank": nbytes / med / 1e9,
            "gbps_all": nbytes * together / med / 1e9,
        }
    del view
    mm.close()
    os.close(fd)
    if comm.rank == 0:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

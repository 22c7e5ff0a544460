"""Ways to read one rank's rows of an HDF5 dataset into page-locked memory, timed side by side: what
spmd's reader does against h5py used plainly and against raw reads of the chunks (one thread and several),
the ceiling of the file system (or page cache) underneath.

    python -m bench.tools.read_paths data/bench/plugin-sum.h5 x [--context]   # JSON: median ms and GB/s of each

``--context``: measured inside spmd's runtime as ``spmd run`` sets it up (its watchdog thread running).
"""

from bench.usage import answer_help

answer_help(
    __doc__, "python -m bench.tools.read_paths FILE DATASET [--context]"
)  # before the libraries a machine may lack

import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import h5py
import numpy as np

from spmd.core import xp as xpmod
from spmd.io.hdf5 import plan_rank_input
from spmd.workloads.registry import job_config_from_dict


def main(path: str, dataset: str, rounds: int = 5) -> int:
    cfg = job_config_from_dict({"workload": "reduce", "input": {"path": path, "dataset": dataset}})
    plan = plan_rank_input(cfg.input, None, 0, 1, ("float32", "float64"), (1, 2))
    host = xpmod.empty_host(plan.shape, plan.dtype, pinned=True)
    rows = plan.shape[0]
    with h5py.File(path, "r") as f:
        ds = f[dataset]
        chunks = [ds.id.get_chunk_info(i) for i in range(ds.id.get_num_chunks())] if ds.chunks else []
        plain = ds.compression is None and ds.chunks is not None
        chunk_rows = ds.chunks[0] if ds.chunks else rows
    raw = memoryview(host.reshape(-1).view(np.uint8))
    fd = os.open(path, os.O_RDONLY)
    row_bytes = host.nbytes // rows

    def pread_chunk(info):
        start = info.chunk_offset[0] * row_bytes
        size = min(info.size, host.nbytes - start)
        os.preadv(fd, [raw[start : start + size]], info.byte_offset)

    def h5_plain():
        with h5py.File(path, "r") as f:
            f[dataset].read_direct(host, np.s_[0:rows])

    def h5_dest():
        with h5py.File(path, "r") as f:
            f[dataset].read_direct(host, np.s_[0:rows], np.s_[0:rows])

    pool = ThreadPoolExecutor(8)
    ways = {
        "h5py read_direct": h5_plain,
        "h5py read_direct, dest_sel": h5_dest,
        "spmd RankInput.read_into": lambda: plan.read_into(host),
    }
    if plain:
        ways["pread of each chunk, 1 thread"] = lambda: [pread_chunk(c) for c in chunks]
        ways["pread of each chunk, 8 threads"] = lambda: list(pool.map(pread_chunk, chunks))
    times = {name: [] for name in ways}
    for _ in range(rounds + 1):  # the first round warms the page cache and is not kept
        for name, way in ways.items():
            t = time.perf_counter()
            way()
            times[name].append(time.perf_counter() - t)
    out = {"bytes": host.nbytes, "chunk_rows": chunk_rows, "rounds": rounds}
    for name, ts in times.items():
        m = statistics.median(ts[1:])
        out[name] = {"ms": m * 1e3, "GBps": host.nbytes / m / 1e9, "range_ms": [min(ts[1:]) * 1e3, max(ts[1:]) * 1e3]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    if "--context" in sys.argv[3:]:
        from spmd.core.runtime import Context

        with Context(watchdog=True):
            sys.exit(main(sys.argv[1], sys.argv[2]))
    sys.exit(main(sys.argv[1], sys.argv[2]))

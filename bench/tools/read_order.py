"""Does the order in which reader threads take a file's pieces matter? One file read cold (pages dropped with
posix_fadvise before each read) by one plain pread, and by 2 and 8 threads taking 8 MiB pieces either dealt out
in turn (strided) or as one contiguous run each (blocked, what spmd's direct engine does). JSON on stdout:
GB/s of each way, every round.

    python -m bench.tools.read_order FILE [--rounds 3] > read-order.json
"""

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    path, size = args.path, os.path.getsize(args.path)
    buffer = memoryview(bytearray(size))

    def drop():
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)

    def pread(fd, offset, n):
        done = 0
        while done < n:
            done += os.preadv(fd, [buffer[offset + done : offset + n]], offset + done)

    def strided(threads, piece):
        fd = os.open(path, os.O_RDONLY)
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda o: pread(fd, o, min(piece, size - o)), range(0, size, piece)))
        os.close(fd)

    def blocked(threads, piece):
        fd = os.open(path, os.O_RDONLY)
        per = -(-size // threads)

        def run(t):
            end = min(size, (t + 1) * per)
            for o in range(t * per, end, piece):
                pread(fd, o, min(piece, end - o))

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(run, range(threads)))
        os.close(fd)

    def one():
        fd = os.open(path, os.O_RDONLY)
        pread(fd, 0, size)
        os.close(fd)

    ways = {"one pread": one}
    for threads in (2, 8):
        ways[f"{threads} threads, 8 MiB pieces in turn"] = lambda t=threads: strided(t, 8 << 20)
        ways[f"{threads} threads, a contiguous run each"] = lambda t=threads: blocked(t, 8 << 20)
    out = {"bytes": size, "cpus": os.cpu_count(), "GBps": {}}
    for _ in range(args.rounds):
        for name, way in ways.items():
            drop()
            t0 = time.perf_counter()
            way()
            out["GBps"].setdefault(name, []).append(size / (time.perf_counter() - t0) / 1e9)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

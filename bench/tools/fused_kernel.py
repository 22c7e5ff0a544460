"""The fused moments kernel alone, per variant, against the HBM read ceiling (GPU).

python -m bench.tools.fused_kernel        -> JSON on stdout, Markdown tables on stderr.

First the floor probes of moments_floor.cu (``floors``, spmd's grid doing less per value). Then each launch shape and
input dtype, timed by turns with CuPy's sum of the same array (ceilings.alternating_seconds), so each row's ratio is
to a ceiling of the same moments. A ceiling timed once would lend every row its own error: on an H200 the sum timed
once at a sweep's start ran at 4.34 TB/s, by turns in the same call's reduce case at 4.47. Each row also gives the
blocks the driver keeps resident on an SM and the registers a thread takes.
"""

from bench.usage import answer_help

answer_help(__doc__, "python -m bench.tools.fused_kernel (a GPU, CuPy)")  # before the libraries a machine may lack

import itertools
import json
import sys
from pathlib import Path

import cupy
import numpy as np

from bench.ceilings import alternating_seconds, hbm_read_TBps
from spmd.workloads.reduce.moments import FusedMoments


def variants():
    """(label, kernel) pairs. First spmd's default (the ring in shared memory or loads into registers, as the device
    gets it). Then loads into registers, loads x min/max x launch bounds, at the resident grid and at fixed blocks per
    SM (a grid past the resident blocks runs a second wave). Last the ring, stages x loads x launch bounds, and fixed
    blocks per SM."""
    yield "default", FusedMoments()
    for fast, loads, min_blocks in itertools.product((False, True), (2, 4, 8), (0, 4)):
        yield "registers", FusedMoments(loads=loads, fast_minmax=fast, min_blocks=min_blocks, async_stages=0)
    for blocks in (2, 4, 6):
        yield "registers, fixed grid", FusedMoments(blocks_per_sm=blocks, async_stages=0)
    for (stages, loads), min_blocks in itertools.product(((2, 2), (2, 4), (3, 3), (4, 2), (5, 2)), (0, 4)):
        yield "ring", FusedMoments(loads=loads, async_stages=stages, min_blocks=min_blocks)
    for blocks in (2, 4):
        yield "ring, fixed grid", FusedMoments(blocks_per_sm=blocks, async_stages=2)


# moments_floor.cu's probes: the moments kernel's grid and loads on float32 data, each doing less work per value
FLOORS = {
    0: "a float32 sum",
    1: "a float64 sum",
    2: "float64 sums of values and squares",
    3: "float64 sums of values and squares, float32 min/max and NaN flag",
}


def floors(x, rounds: int = 5, repeats: int = 20) -> list[dict]:
    """What a kernel of spmd's default grid, block and loads reads float32 data at when it does less per value (the
    probes of moments_floor.cu), each timed by turns with spmd's kernel and CuPy's sum: where even a float64 sum of
    the values falls short of the ceiling, converting and adding in double is the limit, not the moments' merges."""
    default = FusedMoments()
    shape = default.shape(np.float32)
    source = (Path(__file__).parent / "moments_floor.cu").read_text()
    loads, threads = shape["loads"], FusedMoments.THREADS
    per_round = loads * shape["blocks"] * threads  # float4 vectors of one round of the whole grid
    nvec = x.size // 4 // per_round * per_round
    out = cupy.empty(shape["blocks"] * threads, dtype=cupy.float64)
    fns = {"cupy": lambda: x.sum(), "spmd": lambda: default(x)}
    for work in FLOORS:
        kernel = cupy.RawKernel(source, "floor_probe", options=(f"-DWORK={work}", f"-DLOADS={loads}"))
        fns[work] = lambda k=kernel: k((shape["blocks"],), (threads,), (x, np.int64(nvec), out))
    timed = alternating_seconds(fns, rounds=rounds, repeats=repeats)
    ceiling = x.nbytes / timed["cupy"] / 1e12
    rows = [{"work": "spmd's fused moments", "TBps": x.nbytes / timed["spmd"] / 1e12, "ceiling_TBps": ceiling}]
    rows += [{"work": FLOORS[w], "TBps": nvec * 16 / timed[w] / 1e12, "ceiling_TBps": ceiling} for w in FLOORS]
    for row in rows:
        print(f"| {row['work']} | {row['TBps']:.2f} | {row['TBps'] / ceiling:.1%} |", file=sys.stderr)
    return rows


def main():
    nbytes = 4 << 30
    data = {
        np.float32: cupy.random.standard_normal(nbytes // 4, dtype=cupy.float32),
        np.float64: cupy.random.standard_normal(nbytes // 8, dtype=cupy.float64),
    }
    ceiling = hbm_read_TBps(data[np.float32])
    print(f"HBM read ceiling (CuPy sum, 4 GiB float32): {ceiling:.2f} TB/s\n", file=sys.stderr)
    print("| floor probe (float32) | TB/s | / CuPy sum |\n|---|---|---|", file=sys.stderr)
    floor_rows = floors(data[np.float32])
    print(
        "\n| variant | ring stages | loads/thread | blocks/SM (resident) | registers | launch bounds | min/max | dtype "
        "| ms | TB/s | / CuPy sum beside it |\n|---|---|---|---|---|---|---|---|---|---|---|",
        file=sys.stderr,
    )
    rows = []
    for label, kernel in variants():
        minmax = "min/max + NaN flag" if kernel.fast_minmax else "NaN-propagating select"
        for dtype, x in data.items():
            shape = kernel.shape(dtype)
            timed = alternating_seconds({"kernel": lambda: kernel(x), "cupy": lambda: x.sum()}, rounds=3, repeats=10)
            seconds, beside = timed["kernel"], nbytes / timed["cupy"] / 1e12
            rate = nbytes / seconds / 1e12
            row = {
                "variant": label,
                "stages": shape["stages"],
                "loads": shape["loads"],
                "blocks_per_sm": shape["blocks_per_sm"],
                "resident_per_sm": shape["resident_per_sm"],
                "registers": shape["registers"],
                "min_blocks": kernel.min_blocks,
                "minmax": minmax,
                "dtype": np.dtype(dtype).name,
                "ms": seconds * 1e3,
                "TBps": rate,
                "ceiling_TBps": beside,
            }
            rows.append(row)
            print(
                f"| {label} | {row['stages'] or '-'} | {row['loads']} "
                f"| {row['blocks_per_sm']} ({row['resident_per_sm']}) "
                f"| {row['registers']} "
                f"| {row['min_blocks'] or '-'} | {minmax} | {row['dtype']} | {seconds * 1e3:.3f} | {rate:.2f} "
                f"| {rate / beside:.1%} |",
                file=sys.stderr,
            )
    print(json.dumps({"bytes": nbytes, "ceiling_TBps": ceiling, "floors": floor_rows, "variants": rows}))


if __name__ == "__main__":
    main()

"""One GPU's kernels against their ceilings, measured beside them: reduce's fused one-pass moments (float64
accumulation) of float32 and float64 data against CuPy's sum over the same bytes (the HBM read ceiling); the
stencil's fused step against a device-to-device copy of the field (read once, written once, what a step must
move); matmul's compute phase against cuBLAS at the same shape."""

from __future__ import annotations

import numpy as np
import yaml

from ..ceilings import alternating_seconds, device_copy_TBps, gemm_TFLOPs, median_seconds
from ..records import Measure
from . import Case

# spmd's reduce kernel changed one way each, timed by turns beside it (subject -> what the change is)
RING = "the same, rounds through a ring in shared memory"
REGISTERS = "the same, rounds loaded into registers"
TWO_WAVES = "the same, twice the resident blocks"
REDUCE_ALTERNATIVES = {
    RING: "a thread's rounds copied asynchronously into a ring of 2 in shared memory (moments.cu's ASYNC_STAGES)",
    REGISTERS: "a thread's rounds loaded into its registers (no ring)",
    TWO_WAVES: "a grid of twice the blocks an SM holds at once (two waves, each block half the share)",
}
JACOBI = np.array([[0, 0.25, 0], [0.25, 0, 0.25], [0, 0.25, 0]])


def reduce_moments(env) -> list[Measure]:
    """float32 (the target) and float64 data of the same size: the same kernel on half as many elements per byte
    shows whether its gap to the ceiling is memory or per-element work. spmd's kernel (the ring or registers, as the
    device gets it), both ways explicitly and a grid of two waves (``REDUCE_ALTERNATIVES``) and CuPy's sum take
    turns, so all of them see the same machine."""
    import cupy

    from spmd.workloads.reduce.moments import RING_STAGES, FusedMoments

    nbytes = (256 << 20) if env.quick else (4 << 30)
    kernel = FusedMoments()
    out = []
    for dtype in (cupy.float32, cupy.float64):
        resident = kernel.shape(dtype)["resident_per_sm"] or 1
        kernels = {
            "spmd fused moments (float64 sums)": kernel,
            RING: FusedMoments(async_stages=RING_STAGES),
            REGISTERS: FusedMoments(async_stages=0),
            TWO_WAVES: FusedMoments(blocks_per_sm=2 * resident),
        }
        x = cupy.random.standard_normal(nbytes // cupy.dtype(dtype).itemsize, dtype=dtype)
        name = cupy.dtype(dtype).name
        ceiling = f"CuPy {name} sum"
        seconds = alternating_seconds({**{s: (lambda k=k: k(x)) for s, k in kernels.items()}, ceiling: x.sum})
        case = f"reduce: moments of {nbytes >> 20} MiB {name}"
        out += [Measure(case, s, nbytes / seconds[s] / 1e12, "read rate", "TB/s") for s in kernels]
        out.append(Measure(case, ceiling, nbytes / seconds[ceiling] / 1e12, "read rate", "TB/s", "ceiling"))
        x = None  # freed before the next array
    return out


def stencil_step(env) -> list[Measure]:
    """The step at three sizes: a 4096^2 field (64 MiB) lives largely in L2 between the read and the write,
    16384^2 (1 GiB) and 32768^2 (4 GiB) stream through HBM."""
    import cupy

    from spmd.workloads.stencil.kernel import FusedStencil, aligned_layout

    out = []
    fused = FusedStencil(JACOBI, "reflect", np.float32, 0.0)
    for n in (1024, 4096) if env.quick else (4096, 16384, 32768):
        shape, col0 = aligned_layout(n, n, 1, np.float32)
        src = cupy.random.standard_normal(shape, dtype=np.float32)
        dst = cupy.full_like(src, np.nan)
        moved = 2 * n * n * 4  # the field read once and written once
        mine = moved / median_seconds(lambda: fused.apply(src, dst, n, n, col0, (0, n, 0, n), [False] * 4)) / 1e12
        src = dst = None  # freed before the ceiling's buffers
        case = f"stencil: a 5-point step of {n}^2 float32"
        out += [
            Measure(case, "spmd fused stencil", mine, "bytes moved per second", "TB/s"),
            Measure(
                case,
                "device copy (read + write)",
                device_copy_TBps(n * n * 4),
                "bytes moved per second",
                "TB/s",
                "ceiling",
            ),
        ]
    return out


def matmul_compute(env) -> list[Measure]:
    n = 4096 if env.quick else 16384
    data = env.work / f"kernels-A{n}.h5"
    cfg = env.work / "kernels-matmul.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "workload": "matmul",
                "device": "gpu",
                "warmup": 1,
                "repeats": 3,
                "input": {"path": str(data), "dataset": "A"},
                "generate": {"shape": [n, n], "dtype": "float32", "seed": 1},
                "params": {
                    "b": {
                        "path": str(env.work / f"kernels-B{n}.h5"),
                        "dataset": "B",
                        "generate": {"shape": [n, n], "dtype": "float32", "seed": 2},
                    },
                    "gather": "none",
                },
                "output": str(env.work / "kernels-matmul-out"),
            }
        )
    )
    if not data.exists():
        env.spmd("generate", cfg, ranks=None)
    env.spmd("run", cfg, "-q", ranks=1)
    mine = env.report(env.work / "kernels-matmul-out")["metrics"]["tflops_compute"]
    case = f"matmul: C = A @ B, {n}^3 float32, 1 GPU"
    return [
        Measure(case, "spmd matmul (compute phase)", mine, "FLOP rate", "TFLOP/s"),
        Measure(case, "cuBLAS GEMM (CuPy)", gemm_TFLOPs(n, n, n, np.float32), "FLOP rate", "TFLOP/s", "ceiling"),
    ]


def cases(env) -> list[Case]:
    return [
        Case("reduce moments", reduce_moments, needs=("gpu",)),
        Case("stencil step", stencil_step, needs=("gpu",)),
        Case("matmul compute", matmul_compute, needs=("gpu",)),
    ]

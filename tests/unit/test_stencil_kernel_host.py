"""The fused CUDA stencil kernel's generated source, compiled for the CPU and run here.

The same source CuPy compiles on a GPU is built by the host C++ compiler with a few
definitions standing in for CUDA's, and launched thread by thread: its boundary mapping,
ghost reads, regions and rows-per-thread loop are checked against SciPy without a GPU
(tests/gpu run it on the device).
"""

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
from scipy import ndimage

from spmd.workloads.stencil.filters import stencil_weights
from spmd.workloads.stencil.kernel import aligned_layout, kernel_source

PRELUDE = """
struct spmd_dim3 { unsigned x, y; };
static spmd_dim3 blockIdx, threadIdx, blockDim;
#define __global__
#define __restrict__
"""
DRIVER = """
extern "C" void launch(const T* in, T* out, int h, int w, long long pitch, int col0, int i0, int i1, int j0,
                       int j1, int t, int b, int l, int r, T cval, unsigned bx, unsigned by, unsigned gx, unsigned gy) {
    blockDim.x = bx; blockDim.y = by;
    for (blockIdx.y = 0; blockIdx.y < gy; ++blockIdx.y)
        for (blockIdx.x = 0; blockIdx.x < gx; ++blockIdx.x)
            for (threadIdx.y = 0; threadIdx.y < by; ++threadIdx.y)
                for (threadIdx.x = 0; threadIdx.x < bx; ++threadIdx.x)
                    stencil(in, out, h, w, pitch, col0, i0, i1, j0, j1, t, b, l, r, cval);
}
"""
COMPILER = shutil.which("g++") or shutil.which("c++")


def host_kernel(tmp_path, weights, boundary, rows_per_thread):
    src = PRELUDE + kernel_source(weights, boundary, np.float64, rows_per_thread).replace("#pragma unroll", "")
    src += "typedef double T;\n" + DRIVER
    (tmp_path / "k.cpp").write_text(src)
    subprocess.run(
        [COMPILER, "-O1", "-shared", "-fPIC", "-o", str(tmp_path / "k.so"), str(tmp_path / "k.cpp")],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(tmp_path / "k.so"))
    ptr, i, ll, d, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_double, ctypes.c_uint
    lib.launch.argtypes = [ptr, ptr, i, i, ll, i, i, i, i, i, i, i, i, i, d, u, u, u, u]

    def apply(src_buf, dst_buf, h, w, col0, region, neighbours, cval, block=(4, 3)):
        i0, i1, j0, j1 = region
        rows = block[1] * rows_per_thread
        grid = (-(-(j1 - j0) // block[0]), -(-(i1 - i0) // rows))
        lib.launch(
            src_buf.ctypes.data,
            dst_buf.ctypes.data,
            h,
            w,
            src_buf.shape[1],
            col0,
            i0,
            i1,
            j0,
            j1,
            *map(int, neighbours),
            cval,
            *block,
            *grid,
        )

    return apply


@pytest.mark.skipif(COMPILER is None, reason="no C++ compiler on this machine")
@pytest.mark.parametrize("boundary", ["reflect", "wrap", "constant"])
@pytest.mark.parametrize("rows_per_thread", [1, 3])
@pytest.mark.parametrize("layout", ["corner block", "whole field"])
def test_generated_kernel_matches_scipy_on_every_region_and_ghost(tmp_path, boundary, rows_per_thread, layout):
    """``corner block``: the top-left block of a 2x2 split, neighbours below and right (ghosts
    filled from the field; with wrap the grid is periodic, so above and left too) and global
    edges elsewhere (mapped by the kernel). ``whole field``: one block, every edge mapped."""
    rng = np.random.default_rng(3)
    weights = rng.standard_normal((5, 5))
    weights[1, 3] = 0  # a zero tap is left out of the source
    full = rng.standard_normal((17, 14))
    want = ndimage.correlate(full, weights, mode=boundary, cval=0.5)
    apply = host_kernel(tmp_path, weights, boundary, rows_per_thread)
    r = 2
    h, w = (9, 8) if layout == "corner block" else full.shape
    shape, col0 = aligned_layout(h, w, r, np.float64)
    src = np.full(shape, np.nan)
    if layout == "whole field":
        neighbours = (False,) * 4
        src[r : r + h, col0 : col0 + w] = full
    else:
        periodic = boundary == "wrap"
        neighbours = (periodic, True, periodic, True)  # top, bottom, left, right
        ghosts = np.pad(full, r, mode="wrap")[: h + 2 * r, : w + 2 * r]  # the block with every ghost around it
        src[:, col0 - r : col0 + w + r] = ghosts
        if not periodic:  # a global edge's ghosts are never read: leave them poisoned
            src[:r] = np.nan
            src[:, :col0] = np.nan
    dst = np.full(shape, np.nan)
    i0, j0 = (r if neighbours[0] else 0), (r if neighbours[2] else 0)
    i1, j1 = h - (r if neighbours[1] else 0), w - (r if neighbours[3] else 0)
    regions = [(i0, i1, j0, j1)]  # the interior, then a strip along each side with a neighbour
    regions += [
        reg
        for reg, present in zip([(0, r, 0, w), (h - r, h, 0, w), (i0, i1, 0, r), (i0, i1, w - r, w)], neighbours)
        if present
    ]
    for region in regions:
        apply(src, dst, h, w, col0, region, neighbours, 0.5)
    np.testing.assert_allclose(dst[r : r + h, col0 : col0 + w], want[:h, :w], rtol=1e-12, atol=1e-12)
    assert np.isnan(dst[:r]).all() and np.isnan(dst[:, :col0]).all()  # nothing written outside the block


def test_kernel_source_bakes_only_nonzero_taps():
    src = kernel_source(stencil_weights("laplacian", 3, 1.0), "reflect", np.float32, 4)
    assert src.count("acc +=") == 5 and "float" in src and "double" not in src
    assert "ii < 0 && !top_nb" in src and "k < 4" in src

"""The fused CUDA stencil kernel's generated source, compiled for the CPU and run here.

The same source CuPy compiles on a GPU is built by the host C++ compiler with a few
definitions standing in for CUDA's, and launched thread by thread: its boundary mapping,
ghost reads, regions, rows-per-thread loop and the vector kernel's rolling window (with the
one-column kernel for regions off the 16-byte grid) are checked against SciPy without a GPU
(tests/gpu run it on the device).
"""

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
from scipy import ndimage

from spmd.workloads.stencil.filters import stencil_weights
from spmd.workloads.stencil.kernel import aligned_layout, kernel_source, launch_grid

PRELUDE = """
struct double2 { double x, y; };
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


def build(tmp_path, weights, boundary, rows_per_thread, vector):
    src = PRELUDE + kernel_source(weights, boundary, np.float64, rows_per_thread, vector).replace("#pragma unroll", "")
    src += "typedef double T;\n" + DRIVER
    path = tmp_path / f"k{vector}.cpp"
    path.write_text(src)
    subprocess.run(
        [COMPILER, "-O1", "-shared", "-fPIC", "-o", str(path.with_suffix(".so")), str(path)],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(path.with_suffix(".so")))
    ptr, i, ll, d, u = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_double, ctypes.c_uint
    lib.launch.argtypes = [ptr, ptr, i, i, ll, i, i, i, i, i, i, i, i, i, d, u, u, u, u]
    return lib


def host_kernel(tmp_path, weights, boundary, rows_per_thread, vector=1):
    """FusedStencil.apply on the host: the vector kernel where launch_grid says, else the one-column kernel; the
    columns each launch used are collected in ``apply.used``."""
    libs = {v: build(tmp_path, weights, boundary, rows_per_thread, v) for v in {1, vector}}

    def apply(src_buf, dst_buf, h, w, col0, region, neighbours, cval, block=(4, 3)):
        i0, i1, j0, j1 = region
        used, grid = launch_grid(region, col0, src_buf.shape[1], vector, block, rows_per_thread)
        apply.used.append(used)
        libs[used].launch(
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

    apply.used = []
    return apply


@pytest.mark.skipif(COMPILER is None, reason="no C++ compiler on this machine")
@pytest.mark.parametrize("boundary", ["reflect", "wrap", "constant"])
@pytest.mark.parametrize("rows_per_thread", [1, 3])
@pytest.mark.parametrize("layout", ["corner block", "whole field"])
@pytest.mark.parametrize("vector", [1, 2], ids=["one-column", "16-byte"])
def test_generated_kernel_matches_scipy_on_every_region_and_ghost(tmp_path, boundary, rows_per_thread, layout, vector):
    """``corner block``: the top-left block of a 2x2 split, neighbours below and right (ghosts
    filled from the field; with wrap the grid is periodic, so above and left too) and global
    edges elsewhere (mapped by the kernel). ``whole field``: one block, every edge mapped,
    launched in two parts split at an odd column (the second off the 16-byte grid)."""
    rng = np.random.default_rng(3)
    weights = rng.standard_normal((5, 5))
    weights[1, 3] = 0  # a zero tap is left out of the source
    full = rng.standard_normal((17, 14))
    want = ndimage.correlate(full, weights, mode=boundary, cval=0.5)
    apply = host_kernel(tmp_path, weights, boundary, rows_per_thread, vector)
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
    regions = [(i0, i1, j0, j1)] if layout == "corner block" else [(0, h, 0, 7), (0, h, 7, w)]
    # the interior, then a strip along each side with a neighbour
    regions += [
        reg
        for reg, present in zip([(0, r, 0, w), (h - r, h, 0, w), (i0, i1, 0, r), (i0, i1, w - r, w)], neighbours)
        if present
    ]
    for region in regions:
        apply(src, dst, h, w, col0, region, neighbours, 0.5)
    np.testing.assert_allclose(dst[r : r + h, col0 : col0 + w], want[:h, :w], rtol=1e-12, atol=1e-12)
    assert np.isnan(dst[:r]).all() and np.isnan(dst[:, :col0]).all()  # nothing written outside the block
    assert np.isnan(dst[r + h :]).all() and np.isnan(dst[:, col0 + w :]).all()
    if vector > 1:  # both kernels ran: the vector one where aligned, the one-column one off the grid
        assert set(apply.used) == ({2} if layout == "corner block" else {1, 2})


def test_kernel_source_bakes_only_nonzero_taps():
    src = kernel_source(stencil_weights("laplacian", 3, 1.0), "reflect", np.float32, 4)
    assert src.count("acc +=") == 5 and "float" in src and "double" not in src
    assert "ii < 0 && !top_nb" in src and "k < 4" in src

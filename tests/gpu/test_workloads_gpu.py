"""matmul and stencil pieces that exist only on a GPU: the fused stencil kernel on the device
(every boundary mode, mapped edges and ghost reads) and TF32 for float32 GEMMs."""

import numpy as np
import pytest

from spmd.workloads.stencil.filters import reference_filter
from spmd.workloads.stencil.kernel import FusedStencil, aligned_layout

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("vector", [1, None], ids=["one-column", "16-byte"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("boundary", ["reflect", "wrap", "constant"])
def test_fused_kernel_on_the_device_matches_the_reference(boundary, dtype, vector):
    import cupy

    rng = np.random.default_rng(4)
    weights = rng.standard_normal((5, 5))
    field = rng.standard_normal((203, 150))
    h, w, r = *field.shape, 2
    shape, col0 = aligned_layout(h, w, r, dtype)
    src = cupy.full(shape, np.nan, dtype=dtype)
    src[r : r + h, col0 : col0 + w] = cupy.asarray(field.astype(dtype))
    dst = cupy.full_like(src, np.nan)
    kernel = FusedStencil(weights, boundary, dtype, 0.25, rows_per_thread=8, vector=vector)
    # launched in parts, no seams; column 70 is off the 16-byte grid (the one-column kernel), row 100 cuts tiles
    for region in ((0, 100, 0, w), (100, h, 0, 70), (100, h, 70, w)):
        kernel.apply(src, dst, h, w, col0, region, [False] * 4)
    want = reference_filter(field.astype(dtype), weights, boundary, 0.25, 1)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(cupy.asnumpy(dst[r : r + h, col0 : col0 + w]), want, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("vector", [1, None], ids=["one-column", "16-byte"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_kernel_reads_the_ghost_cells_where_a_side_has_a_neighbour(dtype, vector):
    """Every side has a neighbour: the halo filled the ghost cells, so the block's result is the filter of the
    larger field that holds them, whatever the boundary mode."""
    import cupy

    rng = np.random.default_rng(5)
    weights = rng.standard_normal((5, 5))
    h, w, r = 131, 260, 2
    larger = rng.standard_normal((h + 2 * r, w + 2 * r)).astype(dtype)
    shape, col0 = aligned_layout(h, w, r, dtype)
    src = cupy.full(shape, np.nan, dtype=dtype)
    src[:, col0 - r : col0 + w + r] = cupy.asarray(larger)
    dst = cupy.full_like(src, np.nan)
    kernel = FusedStencil(weights, "reflect", dtype, 0.0, vector=vector)
    kernel.apply(src, dst, h, w, col0, (0, h, 0, w), [True] * 4)
    want = reference_filter(larger.astype(np.float64), weights, "constant", 0.0, 1)[r:-r, r:-r]
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(cupy.asnumpy(dst[r : r + h, col0 : col0 + w]), want, rtol=tol, atol=tol * 10)
    outside = (dst[:r], dst[r + h :], dst[:, :col0], dst[:, col0 + w :])
    assert all(bool(cupy.isnan(part).all()) for part in outside)  # nothing outside the block written


def test_tf32_switches_float32_gemms_and_back():
    import cupy

    from spmd.core import xp as xpmod

    a = cupy.asarray(np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32))
    exact = cupy.asnumpy(a.astype(cupy.float64) @ a.astype(cupy.float64))
    xpmod.set_tf32(True)
    fast = cupy.asnumpy(a @ a)
    xpmod.set_tf32(False)
    plain = cupy.asnumpy(a @ a)
    err_fast, err_plain = np.abs(fast - exact).max(), np.abs(plain - exact).max()
    assert err_fast > 10 * err_plain  # TF32 rounds the inputs to 10 mantissa bits

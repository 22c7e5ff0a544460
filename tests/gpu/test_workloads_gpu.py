"""matmul and stencil pieces that exist only on a GPU: the fused stencil kernel on the device
(every boundary mode, mapped edges and ghost reads) and TF32 for float32 GEMMs."""

import numpy as np
import pytest

from spmd.workloads.stencil.filters import reference_filter
from spmd.workloads.stencil.kernel import FusedStencil, aligned_layout

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("boundary", ["reflect", "wrap", "constant"])
def test_fused_kernel_on_the_device_matches_the_reference(boundary, dtype):
    import cupy

    rng = np.random.default_rng(4)
    weights = rng.standard_normal((5, 5))
    field = rng.standard_normal((203, 150))
    h, w, r = *field.shape, 2
    shape, col0 = aligned_layout(h, w, r, dtype)
    src = cupy.full(shape, np.nan, dtype=dtype)
    src[r : r + h, col0 : col0 + w] = cupy.asarray(field.astype(dtype))
    dst = cupy.full_like(src, np.nan)
    kernel = FusedStencil(weights, boundary, dtype, 0.25)
    for region in ((0, 100, 0, w), (100, h, 0, 70), (100, h, 70, w)):  # launched in parts: no seams
        kernel.apply(src, dst, h, w, col0, region, [False] * 4)
    want = reference_filter(field.astype(dtype), weights, boundary, 0.25, 1)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(cupy.asnumpy(dst[r : r + h, col0 : col0 + w]), want, rtol=tol, atol=tol * 10)


def test_tf32_switches_float32_gemms_and_back():
    import cupy

    from spmd import xp as xpmod

    a = cupy.asarray(np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32))
    exact = cupy.asnumpy(a.astype(cupy.float64) @ a.astype(cupy.float64))
    xpmod.set_tf32(True)
    fast = cupy.asnumpy(a @ a)
    xpmod.set_tf32(False)
    plain = cupy.asnumpy(a @ a)
    err_fast, err_plain = np.abs(fast - exact).max(), np.abs(plain - exact).max()
    assert err_fast > 10 * err_plain  # TF32 rounds the inputs to 10 mantissa bits

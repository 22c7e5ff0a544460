"""Stencil weights and the single-process reference filter (spmd.workloads.stencil.filters), against SciPy."""

import numpy as np
import pytest
from scipy import ndimage

from spmd.core.errors import ConfigError
from spmd.workloads.stencil.filters import error_bound, reference_filter, stencil_weights


def test_named_weights():
    assert np.allclose(stencil_weights("box", 3, 1.0), np.full((3, 3), 1 / 9))
    g = stencil_weights("gaussian", 5, 1.5)
    assert g.shape == (5, 5) and np.isclose(g.sum(), 1) and np.allclose(g, g.T) and np.allclose(g, g[::-1])
    assert g[2, 2] == g.max()
    assert stencil_weights("laplacian", 3, 1.0).tolist() == [[0, 1, 0], [1, -4, 1], [0, 1, 0]]
    assert stencil_weights([[1, 2, 3], [4, 5, 6], [7, 8, 9]], 3, 1.0)[0, 2] == 3


@pytest.mark.parametrize(
    "kernel,size,sigma,match",
    [
        ("box", 4, 1.0, "odd width"),
        ("gaussian", 3, 0.0, "sigma"),
        ("laplacian", 5, 1.0, "5-point"),
        ("sobel", 3, 1.0, "not box"),
        ([[1, 2], [3, 4]], 3, 1.0, "odd square"),
        ([[1, 2, 3]], 3, 1.0, "odd square"),
        ([[float("nan")]], 3, 1.0, "finite"),
    ],
)
def test_bad_kernels_are_config_errors(kernel, size, sigma, match):
    with pytest.raises(ConfigError, match=match):
        stencil_weights(kernel, size, sigma)


@pytest.mark.parametrize("boundary", ["reflect", "wrap", "constant"])
@pytest.mark.parametrize("size", [1, 3, 5, 7])
def test_reference_filter_is_scipy_correlate(boundary, size):
    """Not flipped (correlation), scipy's boundary meanings, Jacobi iterations."""
    rng = np.random.default_rng(size)
    field = rng.standard_normal((19, 13))
    weights = rng.standard_normal((size, size))
    want = field
    for _ in range(3):
        want = ndimage.correlate(want, weights, mode=boundary, cval=0.75)
    np.testing.assert_allclose(reference_filter(field, weights, boundary, 0.75, 3), want, rtol=1e-12, atol=1e-12)


def test_error_bound_grows_with_iterations_and_gain():
    w = stencil_weights("laplacian", 3, 1.0)
    assert error_bound(w, 2, np.float32, 1.0) > error_bound(w, 1, np.float32, 1.0) > error_bound(w, 1, np.float64, 1.0)
    smooth = stencil_weights("box", 3, 1.0)
    assert error_bound(smooth, 100, np.float32, 1.0) < 1e-3  # a smoothing filter does not amplify

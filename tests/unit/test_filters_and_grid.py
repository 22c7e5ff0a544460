"""Stencil weights, the single-process reference (against SciPy), process grids and blocks."""

import numpy as np
import pytest
from scipy import ndimage

from spmd.core.errors import ConfigError
from spmd.io.plan import Grid, choose_grid, grid_block
from spmd.workloads.matmul.check import sample_rows, tau
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


@pytest.mark.parametrize(
    "size,want",
    [(1, (1, 1)), (2, (2, 1)), (3, (3, 1)), (4, (2, 2)), (6, (3, 2)), (8, (4, 2)), (12, (4, 3)), (7, (7, 1))],
)
def test_default_grids_are_nearly_square(size, want):
    assert (choose_grid(size).rows, choose_grid(size).cols) == want


def test_requested_grid_must_match_the_ranks():
    assert choose_grid(6, (1, 6)) == Grid(1, 6)
    with pytest.raises(ConfigError, match="2 x 2 = 4 ranks, but the job has 3"):
        choose_grid(3, (2, 2))
    with pytest.raises(ConfigError, match="rows, cols"):
        choose_grid(3, (3,))


@pytest.mark.parametrize("grid", [Grid(3, 1), Grid(2, 2), Grid(2, 3), Grid(1, 4)])
def test_blocks_tile_the_matrix_exactly_once(grid):
    count = np.zeros((11, 7), int)
    for rank in range(grid.size):
        b = grid_block((11, 7), grid, rank)
        assert grid.rank(*grid.position(rank)) == rank
        count[b.r0 : b.r1, b.c0 : b.c1] += 1
    assert (count == 1).all()


def test_matmul_tolerances_and_sampled_rows():
    assert tau("float64", 1000, False) < tau("float32", 1000, False) < tau("float32", 1000, True)
    assert tau("float32", 4 * 1000, False) > tau("float32", 1000, False)
    blocks = [grid_block((20, 5), Grid(3, 1), r) for r in range(3)]
    rows = sample_rows(20, blocks, 3, seed=1)
    assert {0, 6, 7, 13, 14, 19} <= set(rows) and rows == sorted(set(rows)) and len(rows) <= 9

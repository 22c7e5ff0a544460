"""Who owns what (spmd.io.plan): balanced row splits over ranks, process grids and their blocks."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spmd.core.errors import ConfigError
from spmd.io.plan import Grid, block_range, block_ranges, choose_grid, grid_block


@given(total=st.integers(0, 10_000), parts=st.integers(1, 257))
def test_every_row_exactly_once_and_balanced(total, parts):
    ranges = block_ranges(total, parts)
    assert len(ranges) == parts
    rows = [r for start, stop in ranges for r in range(start, stop)]
    assert rows == list(range(total))  # contiguous, in rank order, each row once
    sizes = [stop - start for start, stop in ranges]
    assert max(sizes) - min(sizes) <= 1
    # the first total % parts ranks hold the extra row
    assert sizes == sorted(sizes, reverse=True)
    assert sum(1 for s in sizes if s > total // parts) == total % parts


def test_uneven_split_by_hand():
    assert block_ranges(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert block_range(2, 3, 2) == (2, 2)


def test_bad_part_raises():
    import pytest

    with pytest.raises(ValueError):
        block_range(10, 3, 3)


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

from hypothesis import given
from hypothesis import strategies as st

from spmd.io.plan import block_range, block_ranges


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

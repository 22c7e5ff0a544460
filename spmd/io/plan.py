"""Who owns what: balanced splits of rows or shard files over ranks, and the blocks of a matrix
on a 2-D process grid.

Rank r sits at grid position (r // cols, r % cols): row-major, so the ranks of one grid row are
neighbours in rank order (and usually on one node). A rows-only split is the grid (size, 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import ConfigError


def block_range(total: int, parts: int, index: int) -> tuple[int, int]:
    """Half-open range [start, stop) of part ``index`` when ``total`` items split into ``parts``.

    Blocks are contiguous and in rank order; the first ``total % parts`` parts get one
    item more than the rest, so sizes differ by at most one.
    """
    if parts <= 0 or not 0 <= index < parts:
        raise ValueError(f"part {index} of {parts} does not exist")
    base, extra = divmod(total, parts)
    start = index * base + min(index, extra)
    return start, start + base + (1 if index < extra else 0)


def block_ranges(total: int, parts: int) -> list[tuple[int, int]]:
    """``block_range`` for every part, in order."""
    return [block_range(total, parts, i) for i in range(parts)]


@dataclass(frozen=True)
class Grid:
    """A ``rows`` x ``cols`` process grid."""

    rows: int
    cols: int

    @property
    def size(self) -> int:
        return self.rows * self.cols

    def position(self, rank: int) -> tuple[int, int]:
        """(grid row, grid column) of ``rank``."""
        return divmod(rank, self.cols)

    def rank(self, row: int, col: int) -> int:
        return row * self.cols + col

    def neighbours(self, rank: int, periodic: bool) -> dict[str, int | None]:
        """The rank above, below, left and right of ``rank`` ('top', 'bottom', 'left', 'right'), None
        past an edge; ``periodic`` wraps each dimension that has several ranks."""
        row, col = self.position(rank)

        def at(r: int, c: int, count: int, index: int) -> int | None:
            if 0 <= index < count:
                return self.rank(r, c)
            if periodic and count > 1:
                return self.rank(r % self.rows, c % self.cols)
            return None

        return {
            "top": at(row - 1, col, self.rows, row - 1),
            "bottom": at(row + 1, col, self.rows, row + 1),
            "left": at(row, col - 1, self.cols, col - 1),
            "right": at(row, col + 1, self.cols, col + 1),
        }


def choose_grid(size: int, requested: tuple[int, ...] | None = None) -> Grid:
    """The grid of ``size`` ranks: ``requested`` [rows, cols] if given (checked), else the
    most nearly square one with rows >= cols (2 -> 2x1, 3 -> 3x1, 4 -> 2x2, 6 -> 3x2)."""
    if requested is not None:
        if len(requested) != 2 or min(requested) < 1:
            raise ConfigError(f"params.grid: expected [rows, cols] of positive integers, got {list(requested)}")
        if requested[0] * requested[1] != size:
            raise ConfigError(
                f"params.grid: {requested[0]} x {requested[1]} = {requested[0] * requested[1]} "
                f"ranks, but the job has {size}"
            )
        return Grid(*requested)
    cols = max(c for c in range(1, int(size**0.5) + 1) if size % c == 0)
    return Grid(size // cols, cols)


@dataclass(frozen=True)
class Block:
    """Rows [r0, r1) and columns [c0, c1) of a global matrix."""

    r0: int
    r1: int
    c0: int
    c1: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.r1 - self.r0, self.c1 - self.c0

    def describe(self) -> str:
        return f"rows {self.r0}-{self.r1}, columns {self.c0}-{self.c1}"


def grid_block(shape: tuple[int, int], grid: Grid, rank: int) -> Block:
    """The block of a ``shape`` matrix that ``rank`` owns on ``grid`` (balanced splits)."""
    row, col = grid.position(rank)
    r0, r1 = block_range(shape[0], grid.rows, row)
    c0, c1 = block_range(shape[1], grid.cols, col)
    return Block(r0, r1, c0, c1)

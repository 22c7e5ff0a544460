"""Balanced block splits: which rows (or shard files) each rank owns."""

from __future__ import annotations


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

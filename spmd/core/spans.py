"""Spans of time on one clock, as (start, end) pairs: their union and its length."""

from __future__ import annotations


def union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals as sorted disjoint intervals."""
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def length(spans) -> float:
    """The total length of disjoint intervals."""
    return sum(b - a for a, b in spans)

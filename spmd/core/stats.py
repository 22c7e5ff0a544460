"""Confidence intervals of a median from repeated timings, and the noise rule that uses them.

The interval is distribution-free (order statistics): with n repeats sorted, [x_(j), x_(n+1-j)] holds the true
median with probability P(j <= B <= n - j), B ~ Binomial(n, 1/2), whatever the distribution of the times (a
timing's tail is long and one-sided, so a normal interval would lie). The widest j that reaches 95% is used;
below 6 repeats no j does, and the interval is [min, max] at the level it has (5 repeats: 93.8%).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

LEVEL = 0.95
BOUND = 0.05  # a timing is tight when its interval lies within +-5% of its median
MIN_REPEATS_95 = 6  # the fewest repeats with a 95% distribution-free interval of the median


@dataclass(frozen=True)
class Interval:
    """A median and its confidence interval [low, high] at ``level`` (the coverage reached), over ``n`` values."""

    median: float
    low: float
    high: float
    level: float
    n: int

    def relative_halfwidth(self) -> float:
        """The larger distance from the median to an end, as a share of the median (inf for a median of 0)."""
        if self.median <= 0:
            return 0.0 if self.high <= 0 else math.inf
        return max(self.median - self.low, self.high - self.median) / self.median

    def tight(self, bound: float = BOUND, need_level: bool = True) -> bool:
        """The interval is within +-``bound`` of the median and (``need_level``) reaches the 95% level; a fixed
        number of repeats below 6 is judged by the interval it has ([min, max])."""
        return (self.level >= LEVEL or not need_level) and self.relative_halfwidth() <= bound

    def to_dict(self) -> dict:
        return {"median": self.median, "low": self.low, "high": self.high, "level": self.level, "n": self.n}


def coverage(n: int, j: int) -> float:
    """P(x_(j) <= true median <= x_(n+1-j)) for n values: 1 - 2 P(B <= j - 1), B ~ Binomial(n, 1/2)."""
    tail = sum(math.comb(n, i) for i in range(j)) / 2**n
    return max(0.0, 1.0 - 2.0 * tail)


def median_interval(values, level: float = LEVEL) -> Interval:
    """The median of ``values`` and its order-statistics confidence interval at ``level`` (or the most that n
    values give: [min, max])."""
    xs = sorted(float(v) for v in values)
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    j = 1
    while j + 1 <= n // 2 and coverage(n, j + 1) >= level:
        j += 1
    return Interval(statistics.median(xs), xs[j - 1], xs[n - j], coverage(n, j) if n > 1 else 0.0, n)


def ratio_interval(num: Interval, den: Interval) -> tuple[float, float]:
    """An interval of num / den from the ends of the two intervals (conservative: each end takes the extremes)."""
    low = num.low / den.high if den.high > 0 else math.inf
    high = num.high / den.low if den.low > 0 else math.inf
    return low, high

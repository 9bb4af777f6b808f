"""The confidence interval of a median, from order statistics: how well a series of trials knows its median.

Why order statistics and not a bootstrap: the interval ``[x(k), x(n+1-k)]`` of the sorted series
covers the true median with probability ``1 - 2 P(B <= k-1)``, ``B ~ Binomial(n, 1/2)``, for *any*
continuous distribution of i.i.d. trials (the count of trials below the median is binomial whatever
the times look like), so the coverage is exact and never below the level asked for. It needs one
sort, no random draws (the same series always gives the same decision, and a test can check it by
hand), and no resampling per check, where a bootstrap of B resamples costs B sorts each time the
adaptive loop asks, and is known to be unreliable for the median of small series (its resampled
medians take only a handful of distinct values). Trials of a GPU kernel are skewed and sometimes
bimodal (a clock step, a neighbour's burst): a method that assumes a shape would be wrong exactly
there. Ties (event times come in steps of the timer's resolution) only raise the coverage of the
closed interval.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist

CONFIDENCE = 0.95
# Up to this many trials the ranks are exact (integer binomial sums, under a millisecond); above it
# the normal approximation with continuity correction (constant time). Checked against the exact
# rank for every n in 1001..2000: equal, or one lower at 4 of them (a slightly wider interval).
EXACT_UP_TO = 1000


def lower_rank(n: int, confidence: float = CONFIDENCE) -> int | None:
    """The 1-based rank ``k`` of the interval's lower end (the upper is ``n + 1 - k``): the largest
    ``k`` with ``P(B <= k-1) <= (1 - confidence) / 2``; None when no interval of that level exists
    (n < 6 at 95%: even ``[min, max]`` covers only ``1 - 2^(1-n)``)."""
    return _ranks(n, confidence)[0]


def coverage(n: int, confidence: float = CONFIDENCE) -> float | None:
    """``P(x(k) <= median <= x(n+1-k))`` for n i.i.d. continuous values, ``1 - 2 P(B <= k-1)`` at the
    rank :func:`lower_rank` picks: the level actually held (at least ``confidence``)."""
    return _ranks(n, confidence)[1]


@lru_cache(maxsize=4096)
def _ranks(n: int, confidence: float) -> tuple[int | None, float | None]:
    tail = (1 - Fraction(str(confidence))) / 2
    if n > EXACT_UP_TO:
        z = NormalDist().inv_cdf(1 - float(tail))
        k = max(1, math.floor(n / 2 + 0.5 - z * math.sqrt(n) / 2))
        return k, 1 - 2 * NormalDist(n / 2, math.sqrt(n) / 2).cdf(k - 0.5)
    # Integers only: cum / 2^n > num / den  <=>  cum * den > num * 2^n (no fraction reduced per step).
    limit, cum, within, k, term = tail.numerator << n, 0, 0, 0, 1  # term = C(n, i)
    for i in range(n // 2 + 1):  # cum = sum C(n, j) for j <= i; k - 1 = the last i within the tail
        cum += term
        if cum * tail.denominator > limit:
            break
        k, within = i + 1, cum
        term = term * (n - i) // (i + 1)
    if not k:
        return None, None
    return k, 1 - 2 * float(Fraction(within, 1 << n))


@dataclass(frozen=True)
class MedianInterval:
    """The median of a series and its confidence interval; ``rel`` is the half-width relative to the
    median, taken on the wider side (the interval lies within ``median * (1 ± rel)``)."""

    median: float
    low: float | None
    high: float | None
    rel: float | None
    coverage: float | None  # the interval's exact coverage (>= the level asked for), None without one


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> MedianInterval:
    """``values`` need not be sorted. ``rel`` is None without an interval (too few values) and when
    the median is not positive while the interval has width (a relative width means nothing there)."""
    if not values:
        raise ValueError("median_interval needs at least one value")
    xs = sorted(values)
    n = len(xs)
    median = (xs[(n - 1) // 2] + xs[n // 2]) / 2
    k, held = _ranks(n, confidence)
    if k is None:
        return MedianInterval(median, None, None, None, None)
    low, high = xs[k - 1], xs[n - k]
    half = max(median - low, high - median)
    if median > 0:
        rel: float | None = half / median
    else:
        rel = 0.0 if half == 0 else None
    return MedianInterval(median, low, high, rel, held)


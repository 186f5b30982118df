"""The arithmetic of the bench, on plain numbers: percentiles, medians, per-repetition ratios and
differences, and the CPU-per-chunk derivation.

Ratios and differences are taken within one repetition (the direct and gateway runs of the
same repetition ran back to back, so they saw the same machine) and then medianed: a noisy
repetition moves one sample, not both sides of every ratio.

    percentile([1.0, 2.0, 3.0, 4.0], 50)          # 2.5
    per_rep_ratio([100, 110], [50, 50])            # 2.1: median of 100/50 and 110/50
    cpu_per_chunk(0.30, 0.10, 20)                  # 0.01: what 20 chunks added, per chunk
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

QUANTILES = 101  # points of each run's latency distribution kept for plots (0th..100th)


def percentile(ordered: Sequence[float], p: float) -> float | None:
    """Linear interpolation between closest ranks; `ordered` sorted ascending."""
    if not ordered:
        return None
    rank = (len(ordered) - 1) * p / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(ordered: Sequence[float]) -> dict[str, float | None]:
    """p50/p90/p99/p99.9/max/mean of sorted values."""
    return {
        "p50": percentile(ordered, 50),
        "p90": percentile(ordered, 90),
        "p99": percentile(ordered, 99),
        "p999": percentile(ordered, 99.9),
        "max": ordered[-1] if ordered else None,
        "mean": statistics.fmean(ordered) if ordered else None,
    }


def quantiles(ordered: Sequence[float], points: int = QUANTILES) -> list[float]:
    """The distribution in `points` evenly spaced percentiles: what a CDF plot needs."""
    if not ordered:
        return []
    return [percentile(ordered, 100.0 * i / (points - 1)) or 0.0 for i in range(points)]


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def per_rep_ratio(
    numerators: Sequence[float | None], denominators: Sequence[float | None]
) -> float | None:
    """Median over repetitions of numerator[i] / denominator[i] (pairs with a gap or a zero
    denominator left out)."""
    return median(
        [n / d for n, d in zip(numerators, denominators, strict=True) if n is not None and d]
    )


def per_rep_difference(
    minuends: Sequence[float | None], subtrahends: Sequence[float | None]
) -> float | None:
    return median(
        [
            a - b
            for a, b in zip(minuends, subtrahends, strict=True)
            if a is not None and b is not None
        ]
    )


def cpu_per_chunk(
    streamed_per_request: float | None, whole_per_request: float | None, chunks: int
) -> float | None:
    """What a streamed answer cost beyond the same answer whole, per content chunk: (CPU per
    streamed request - CPU per non-streamed request) / chunks. The stream's fixed frames (its
    first and last events) are spread over the chunks too."""
    if streamed_per_request is None or whole_per_request is None or chunks <= 0:
        return None
    return (streamed_per_request - whole_per_request) / chunks


def loglog_slope(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """The least-squares slope of log(y) over log(x): 1 is linear growth, 0 flat, 2 quadratic.
    Points with a missing or non-positive value are left out."""
    pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if y and y > 0]
    if len(pairs) < 2:
        return None
    mean_x = statistics.fmean(p[0] for p in pairs)
    mean_y = statistics.fmean(p[1] for p in pairs)
    spread = sum((x - mean_x) ** 2 for x, _ in pairs)
    if spread == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in pairs) / spread

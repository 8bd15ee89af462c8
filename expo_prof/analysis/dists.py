"""Distributions and shares: the summary statistics every table prints (pure functions)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from expo_prof.analysis.model import Dist


def dist(values: Sequence[int] | np.ndarray) -> Dist:
    """Mean, nearest-rank p50/p99 and max of ``values`` (ns); all 0 for none."""
    x = np.sort(np.asarray(values, dtype=np.int64))
    n = len(x)
    if n == 0:
        return Dist(n=0, mean=0.0, p50=0, p99=0, max=0)

    def at(p: float) -> int:  # nearest-rank percentile: an observed value
        return int(x[max(0, math.ceil(p / 100.0 * n) - 1)])

    return Dist(n=n, mean=float(x.mean()), p50=at(50), p99=at(99), max=int(x[-1]))


def fraction(hidden: int, total: int) -> float | None:
    return hidden / total if total > 0 else None


def opt_dist(values: list[int | None]) -> Dist | None:
    """Distribution of the measured values; None when none was measured."""
    known = [v for v in values if v is not None]
    return dist(known) if known else None




"""Runs that stand out: the warm-up run and MAD outliers.

* **Warm-up**: the *first* run of *both* sides is worse than every other run
  of its side, with a modified z-score beyond :data:`Z_LIMIT` against them
  (caches, JIT, page faults hit whichever side ran first … and the first run
  of the other side too when each side got its own fresh server). Needs 3+
  runs per side.
* **Outlier**: a run whose modified z-score within its side (warm-up runs
  left out) is beyond :data:`Z_LIMIT` (Iglewicz & Hoaglin's 3.5). Needs 5+
  runs per side: the MAD of 3 or 4 values is too unstable.

Either also needs a deviation of at least :data:`MIN_REL_DEVIATION` of the
median of the other runs.

Flags never change the main analysis by themselves: the comparison reports
what leaving them out would change (``--drop-warmup`` / ``--drop-outliers``
make that the main analysis).
"""

from __future__ import annotations

import math

import numpy as np

from expo_prof.abtest.model import Flag
from expo_prof.stats import modified_z

Z_LIMIT = 3.5
#: Runs per side needed to call a first run a warm-up (it is judged against the 2+ others).
MIN_RUNS_WARMUP = 3
#: Runs per side needed for outliers: with fewer, the MAD of 3 values is one deviation and flags noise.
MIN_RUNS_OUTLIER = 5
#: Deviations smaller than this fraction of the median are never flagged (noise, whatever its z).
MIN_REL_DEVIATION = 0.005


def warmup(a_name: str, a_runs: list[str], a_vals: list[float | None],
           b_name: str, b_runs: list[str], b_vals: list[float | None],
           metric: str, better: int) -> list[Flag]:
    """Flags for the first run of each side when both are far worse than the rest of their side; else []."""
    flags: list[Flag] = []
    for name, runs, vals in ((a_name, a_runs, a_vals), (b_name, b_runs, b_vals)):
        present = [v for v in vals if v is not None]
        if len(present) < MIN_RUNS_WARMUP or vals[0] is None:
            return []
        rest = np.array([v for v in vals[1:] if v is not None])
        x0 = vals[0]
        worse_than_all = np.all((x0 - rest) * better < 0)
        z = float(modified_z(np.array([x0]), rest)[0])
        if not (worse_than_all and abs(z) > Z_LIMIT and _far(x0, rest)):
            return []
        flags.append(Flag(kind="warm-up", side=name, run=runs[0], metric=metric, value=x0,
                          reference=float(np.median(rest)), robust_z=_finite(z)))
    return flags


def outliers(side: str, runs: list[str], vals: list[float | None], metric: str,
             skip: set[int] | frozenset[int] = frozenset()) -> list[Flag]:
    """MAD outliers among the runs of one side (indices in ``skip``, e.g. warm-up runs, left out)."""
    idx = [i for i, v in enumerate(vals) if v is not None and i not in skip]
    if len(idx) < MIN_RUNS_OUTLIER:
        return []
    x = np.array([vals[i] for i in idx])
    z = modified_z(x)
    s = np.sort(x)
    out = []
    for k in np.flatnonzero(np.abs(z) > Z_LIMIT).tolist():  # only candidates: linear in the runs, not quadratic
        med = _median_without(s, float(x[k]))
        if _off(float(x[k]), med):
            out.append(Flag(kind="outlier", side=side, run=runs[idx[k]], metric=metric, value=float(x[k]),
                            reference=med, robust_z=_finite(float(z[k]))))
    return out


def _median_without(s: np.ndarray, v: float) -> float:
    """The median of sorted ``s`` with one occurrence of ``v`` left out (``np.median(np.delete(…))`` in O(log n))."""
    p = int(np.searchsorted(s, v))
    m = len(s) - 1

    def at(i: int) -> float:
        return float(s[i] if i < p else s[i + 1])

    return at(m // 2) if m % 2 else (at(m // 2 - 1) + at(m // 2)) / 2.0


def _far(x: float, others: np.ndarray) -> bool:
    return _off(x, float(np.median(others)))


def _off(x: float, med: float) -> bool:
    return abs(x - med) > MIN_REL_DEVIATION * abs(med)


def _finite(z: float) -> float:
    # JSON has no infinity: a run that differs while all others are identical gets a large finite score.
    return z if math.isfinite(z) else math.copysign(1e9, z)

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

One flag is about the sides, not a run: **tokens arrive in bursts**
(:func:`token_arrival`). A side whose inter-token gaps change shape — far more
gaps near zero, or the median gap falling while the tail rises — delivers
several tokens together after a longer wait: its ITL p50 (and mean) fall
without any token arriving sooner. That is a change in how tokens arrive, not
a speed-up; :func:`withdraw_speedup` keeps those rows from being called better
(or worse). A switchback run's arms are judged by the same rule within the run
(expo_prof/analysis/saving/arrival.py; docs/ab.md "Bursty tokens").
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
import numpy as np

from expo_prof.abtest.inputs.sides import Loaded, Run
from expo_prof.abtest.model import BETTER, BURSTS, WORSE, ArrivalSide, Flag, MetricResult, TokenArrival
from expo_prof.pipeline import arrival as _arrival
from expo_prof.stats import modified_z
from expo_prof.words import fmt_ns

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


# ------------------------------------------------------------------------------------ tokens arrive in bursts

# The rule's thresholds, a side's gap shape and the two rules live in analysis (expo_prof/analysis/saving/arrival.py),
# which a switchback run's arms are judged by too; abtest reaches analysis through the pipeline (tools/layering.py).
NEAR_ZERO_SHARE_OF_MEAN = _arrival.NEAR_ZERO_SHARE_OF_MEAN
BURST_SHARE_RISE = _arrival.BURST_SHARE_RISE
SHAPE_CHANGE = _arrival.SHAPE_CHANGE
MIN_GAPS = _arrival.MIN_GAPS
burst_reasons = _arrival.burst_reasons
#: The rows a change of arrival shape moves without any token arriving sooner (p99 is a real wait, kept).
ARRIVAL_METRICS = ("median_itl_ms", "mean_itl_ms")


def arrival_stats(name: str, gaps_s: np.ndarray, runs: int = 1, runs_total: int = 1) -> ArrivalSide:
    """The shape of one side's inter-token gaps (seconds in, ms out): mean, near-zero share, p50, p99, max
    (:func:`expo_prof.analysis.saving.arrival.gap_shape`)."""
    return ArrivalSide(runs=runs, runs_total=runs_total, **msgspec.structs.asdict(_arrival.gap_shape(name, gaps_s)))


def _side(name: str, runs: list[Run]) -> ArrivalSide | None:
    kept = [r.itl_s for r in runs if r.itl_s is not None and len(r.itl_s)]
    if not kept:
        return None
    return arrival_stats(name, np.concatenate(kept), len(kept), len(runs))


def _ms(v: float) -> str:
    return fmt_ns(v * 1e6)


def token_arrival(loaded: Loaded, present: set[str] | frozenset[str] = frozenset(ARRIVAL_METRICS)) -> TokenArrival:
    """Whether one side's tokens arrive in bursts: each side's gaps pooled over its runs (:attr:`Run.itl_s`), then
    the two rules above, side B (the candidate) looked at first. ``present``: the metrics of the comparison,
    so that ``metrics`` names only rows that exist."""
    a, b = _side(loaded.a.name, loaded.a.runs), _side(loaded.b.name, loaded.b.runs)

    def result(**found: Any) -> TokenArrival:
        return TokenArrival(a=a, b=b, near_zero_share_of_mean=NEAR_ZERO_SHARE_OF_MEAN, share_rise=BURST_SHARE_RISE,
                            shape_change=SHAPE_CHANGE, min_gaps=MIN_GAPS, **found)

    if a is None or b is None or min(a.gaps, b.gaps) < MIN_GAPS:
        short = [s for s, st in ((loaded.a.name, a), (loaded.b.name, b)) if st is None or st.gaps < MIN_GAPS]
        statement = (f"not measurable: fewer than {MIN_GAPS} inter-token gaps kept on the {' and '.join(short)} "
                     f"side{'s' if len(short) > 1 else ''} (tables and results saved without --save-detailed "
                     "keep none)")
        return result(measured=False, bursts=None, bursty_side=None, reasons=[], metrics=[], statement=statement)
    for x, y in ((b, a), (a, b)):
        reasons = burst_reasons(x, y)
        if reasons:
            metrics = [m for m in ARRIVAL_METRICS if m in present]
            statement = (f"{BURSTS} on the {x.name} side: " + "; ".join(reasons) + " — a change in how tokens "
                         "arrive, not a speed-up: several tokens reach the client together after a longer wait, so "
                         "ITL p50 and mean move without any token arriving sooner and are not read as better or "
                         "worse; output tok/s and TPOT say the speed")
            return result(measured=True, bursts=True, bursty_side=x.name, reasons=reasons, metrics=metrics,
                          statement=statement)
    statement = (f"tokens arrive alike: near-zero gaps {100 * a.near_zero_share:.1f} % ({a.name}) vs "
                 f"{100 * b.near_zero_share:.1f} % ({b.name}), ITL p50 {_ms(a.p50_ms)} vs {_ms(b.p50_ms)}, "
                 f"p99 {_ms(a.p99_ms)} vs {_ms(b.p99_ms)}")
    return result(measured=True, bursts=False, bursty_side=None, reasons=[], metrics=[], statement=statement)


def withdraw_speedup(results: dict[str, MetricResult], arrival: TokenArrival) -> None:
    """While the flag stands, the ITL p50 / mean rows are no speed-up (or slow-down): a significant change of
    theirs gets the outcome :data:`~expo_prof.abtest.model.BURSTS` instead of better / worse, and every such
    row a note saying why (the test's figures are kept: ``significant``, the CI, p)."""
    if not arrival.bursts:
        return
    for name in arrival.metrics:
        r = results.get(name)
        if r is None:
            continue
        if r.outcome in (BETTER, WORSE):
            r.outcome = BURSTS
        r.notes.append(f"{BURSTS} on the {arrival.bursty_side} side: this change is in how tokens arrive, not "
                       "a speed-up (see token arrival)")

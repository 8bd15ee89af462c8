"""Decide while the switchback runs: a time-uniform confidence sequence on the per-step saving.

A fixed-horizon 95 % confidence interval is valid at one look decided in advance. Looking after every
block pair and stopping at the first interval that excludes zero inflates the error rate far above 5 %
(bench/sim_sequential.py measures how far on real step series). A *confidence sequence* holds at every
look at once: with probability at least 1 − α it contains the true mean saving at **all** numbers of pairs
simultaneously, so the run may stop the first time it settles.

Which sequence: the asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy and Ramdas,
"Time-uniform central limit theory and asymptotic confidence sequences" (Annals of Statistics, 2024;
arXiv:2103.06476), the normal-mixture boundary of Robbins (1970) / Howard, Ramdas, McAuliffe and Sekhon,
"Time-uniform, nonparametric, nonasymptotic confidence sequences" (Annals of Statistics, 2021) applied to
the running mean with the running standard deviation in place of the known one:

    mean_n ± sd_n · sqrt( 2(nρ² + 1) / (n²ρ²) · log( sqrt(nρ² + 1) / α ) )

with ``n`` block pairs, ``mean_n`` and ``sd_n`` (ddof 1) of their differences, and ``ρ²`` chosen so the
sequence is tightest near ``n*`` pairs: ``ρ² = (−2 log α + log(−2 log α + 1)) / n*`` (their choice of ρ for a width optimal near n*).
The boundary is two-sided at level α. It is asymptotic (it needs ``sd_n`` to be a good estimate), so no
decision is taken before :data:`MIN_PAIRS` pairs. The run stops at the first look that settles, and that
decision stands: the analysis after the run finds the same first settling look (the same first pairs) and
reports its decision, with the sequence at the last pair as the figure (valid at every pair at once, so
also there; it holds the mean, which a running intersection of the looks need not).

The three answers (docs/ab.md, "Sequential switchback"):

* the sequence excludes 0: **enable** (the overlay saves time) or **keep off** (it costs);
* the sequence lies inside ±margin: **no effect beyond the margin** — the overlay does not matter here;
  the margin is by default 1 % of the baseline's step cadence (so about ±1 % of output tok/s);
* neither when the budget ends: **undecided**, with the interval so far and about how many more pairs
  (from the current mean and spread) would settle it.
"""

from __future__ import annotations

import math

import numpy as np

from expo_prof.analysis.model import DEFAULT_OPTIMAL_PAIRS, SEQUENCE_ALPHA, SEQUENCE_METHOD, Sequence
from expo_prof.words import ENABLE, KEEP_OFF, NO_EFFECT, UNDECIDED

ALPHA = SEQUENCE_ALPHA
#: No decision from fewer pairs: the running standard deviation of 2–5 pairs is too rough for the asymptotic
#: boundary (bench/sim_sequential.py: with it the false-decision rate under the null stays under α).
MIN_PAIRS = 6
# DEFAULT_OPTIMAL_PAIRS (where the sequence is tightest by default: a short run's decisions are the ones to make
# cheap) and DEFAULT_MARGIN_SHARE (the default margin, a share of the baseline arm's mean cadence) are the schema's
# defaults (analysis/model.py).
#: Largest number of pairs the settle estimate searches (beyond it: "more than this").
MAX_PAIRS = 1_000_000
METHOD = SEQUENCE_METHOD


def rho2_for(optimal_pairs: int, alpha: float = ALPHA) -> float:
    """The ρ² that makes the boundary tightest at ``optimal_pairs`` (Waudby-Smith et al.: the width is smallest near that many pairs)."""
    a = -2.0 * math.log(alpha)
    return (a + math.log(a + 1.0)) / max(1, optimal_pairs)


def half_width(sd: float, n: int | np.ndarray, rho2: float, alpha: float = ALPHA):
    """The boundary's half-width after ``n`` pairs of standard deviation ``sd`` (module docstring)."""
    n = np.asarray(n, dtype=float)
    v = n * rho2 + 1.0
    return sd * np.sqrt(2.0 * v / (n * n * rho2) * np.log(np.sqrt(v) / alpha))


def decide(lo: float | None, hi: float | None, margin_ns: float) -> str:
    """The answer of bounds ``[lo, hi]``: enable / keep off when they exclude 0, no effect inside ±margin."""
    if lo is None or hi is None:
        return UNDECIDED
    if lo > 0:
        return ENABLE
    if hi < 0:
        return KEEP_OFF
    if -margin_ns < lo and hi < margin_ns:
        return NO_EFFECT
    return UNDECIDED


def pairs_to_settle(mean: float, sd: float, margin_ns: float, rho2: float, alpha: float = ALPHA) -> int | None:
    """Fewest pairs at which a sequence with this mean and spread would settle (exclude 0, or fit inside
    ±margin); None beyond :data:`MAX_PAIRS`. ``sd == 0`` settles at :data:`MIN_PAIRS`."""
    if sd == 0.0:
        return MIN_PAIRS

    def settles(n: int) -> bool:
        h = float(half_width(sd, n, rho2, alpha))
        return h < abs(mean) or abs(mean) + h < margin_ns

    lo, hi = MIN_PAIRS, MIN_PAIRS
    while not settles(hi):
        if hi >= MAX_PAIRS:
            return None
        lo, hi = hi, min(MAX_PAIRS, hi * 2)
    while lo < hi:  # the boundary shrinks with n: the first n that settles
        mid = (lo + hi) // 2
        if settles(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def sequence(diffs: np.ndarray, margin_ns: float, *, alpha: float = ALPHA,
             optimal_pairs: int = DEFAULT_OPTIMAL_PAIRS, margin_share: float | None = None) -> Sequence:
    """The confidence sequence of the per-pair savings ``diffs`` (ns per step, in the order the pairs ran), looked
    at after every pair from :data:`MIN_PAIRS` on: the decision of the first look that settles against
    ``margin_ns`` (else of the last), and the bounds at the last pair."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    rho2 = rho2_for(optimal_pairs, alpha)
    mean = float(d.mean()) if n else 0.0
    sd = float(d.std(ddof=1)) if n >= 2 else None
    lo = hi = None
    settled_at = None
    decision = UNDECIDED
    if n >= MIN_PAIRS:
        k = np.arange(1, n + 1)
        run_mean = np.cumsum(d) / k
        # Running standard deviation (ddof 1) at each look, from running sums (k >= 2).
        var = np.maximum(np.cumsum(d * d) - k * run_mean ** 2, 0.0) / np.maximum(k - 1, 1)
        looks = slice(MIN_PAIRS - 1, n)
        h = half_width(np.sqrt(var[looks]), k[looks], rho2, alpha)
        lows, highs = run_mean[looks] - h, run_mean[looks] + h
        lo, hi = float(lows[-1]), float(highs[-1])
        for i in range(len(lows)):
            decision = decide(float(lows[i]), float(highs[i]), margin_ns)
            if decision != UNDECIDED:
                settled_at = MIN_PAIRS + i
                break
    needed = None
    if decision == UNDECIDED and sd is not None:
        total = pairs_to_settle(mean, sd, margin_ns, rho2, alpha)
        needed = None if total is None else max(1, total - n)
    return Sequence(alpha=alpha, optimal_pairs=optimal_pairs, rho2=rho2, pairs=n, mean_ns=mean, sd_ns=sd,
                    lo_ns=lo, hi_ns=hi, margin_ns=margin_ns, margin_share=margin_share, decision=decision,
                    settled_at=settled_at, pairs_needed=needed)

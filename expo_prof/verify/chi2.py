"""Two-sample tests of token distributions, and what size of difference a run could have seen.

numpy and math only (scipy is not a run-time dependency; the tests check
these functions against it):

* the χ² survival function, from the regularised upper incomplete gamma
  function (:func:`expo_prof.special.gammainc_upper`);
* the two-sample χ² test on a 2 × K table, with the categories whose expected
  count is below :data:`MIN_EXPECTED` pooled into one "rare" bin; where even
  the pooled table has small expected counts (or fewer than two bins are
  left) the same statistic gets a seeded Monte Carlo permutation p-value;
* power: the noncentral χ² tail (a Poisson mixture of central ones), and
  from it the smallest total-variation distance that the test would detect
  with the asked power whatever the shape of the difference (see
  :func:`detectable_tv`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from expo_prof.special import gammainc_upper

#: A category with fewer expected counts (per side) than this is pooled into the rare bin.
MIN_EXPECTED = 5.0
#: Monte Carlo resamples of the permutation p-value (seeded: the same counts give the same p).
PERM_RESAMPLES = 4000
PERM_SEED = 20261201


def chi2_sf(x: float, df: float) -> float:
    """P(X > x) for a χ² variable with ``df`` degrees of freedom."""
    return gammainc_upper(df / 2.0, x / 2.0)


def chi2_isf(p: float, df: float) -> float:
    """The critical value c with P(X > c) = p (bisection; p in (0, 1))."""
    lo, hi = 0.0, max(1.0, df)
    while chi2_sf(hi, df) > p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if chi2_sf(mid, df) > p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def ncx2_sf(x: float, df: float, nc: float) -> float:
    """P(X > x) for a noncentral χ² (Poisson mixture of central χ² tails, weights e^{-λ/2}(λ/2)^j/j!)."""
    if nc <= 0.0:
        return chi2_sf(x, df)
    half = nc / 2.0
    j0 = int(half)  # start at the heaviest Poisson weight and walk both ways
    total = 0.0
    for direction in (1, -1):
        j = j0 if direction == 1 else j0 - 1
        while j >= 0:
            w = math.exp(-half + j * math.log(half) - math.lgamma(j + 1.0))
            total += w * chi2_sf(x, df + 2.0 * j)
            if w < 1e-14 and abs(j - j0) > 10:
                break
            j += direction
    return min(1.0, total)


@dataclass(frozen=True)
class TwoSample:
    """One two-sample test of two token-count vectors."""

    method: str  # "chi2" | "permutation"
    statistic: float
    df: int
    p: float
    n_a: int
    n_b: int
    bins: int  # categories tested (rare ones pooled into one)
    pooled_tokens: int  # distinct tokens pooled into the rare bin
    tv: float  # observed total-variation distance between the two empirical distributions (pooled bins)


def _pool(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Keep categories with expected ≥ MIN_EXPECTED on both sides; sum the rest into one rare bin."""
    na, nb = a.sum(), b.sum()
    tot = a + b
    n = na + nb
    expected_min = tot * min(na, nb) / n
    keep = expected_min >= MIN_EXPECTED
    rare = ~keep & (tot > 0)
    ka, kb = a[keep], b[keep]
    if rare.any():
        ka = np.append(ka, a[rare].sum())
        kb = np.append(kb, b[rare].sum())
    return ka.astype(float), kb.astype(float), int(rare.sum())


def _statistic(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's χ² of the 2 × K table [a; b] (empty columns dropped)."""
    tot = a + b
    m = tot > 0
    a, b, tot = a[m], b[m], tot[m]
    na, nb = a.sum(), b.sum()
    n = na + nb
    ea, eb = tot * na / n, tot * nb / n
    return float(((a - ea) ** 2 / ea).sum() + ((b - eb) ** 2 / eb).sum())


def _tv(a: np.ndarray, b: np.ndarray) -> float:
    return float(0.5 * np.abs(a / a.sum() - b / b.sum()).sum())


def two_sample(a_tokens: np.ndarray, b_tokens: np.ndarray) -> TwoSample:
    """Test whether two samples of token ids come from one distribution.

    χ² with rare tokens pooled when every remaining bin expects ≥ MIN_EXPECTED
    counts; otherwise a Monte Carlo permutation test of the same statistic
    (labels shuffled, seeded), whose p-value is ``(1 + #≥obs) / (1 + R)``.
    """
    a_tokens = np.asarray(a_tokens, np.int64)
    b_tokens = np.asarray(b_tokens, np.int64)
    if len(a_tokens) == 0 or len(b_tokens) == 0:
        raise ValueError("two_sample needs samples on both sides")
    ids, inv = np.unique(np.concatenate([a_tokens, b_tokens]), return_inverse=True)
    na = len(a_tokens)
    ca = np.bincount(inv[:na], minlength=len(ids))
    cb = np.bincount(inv[na:], minlength=len(ids))
    pa, pb, pooled = _pool(ca, cb)
    stat = _statistic(pa, pb)
    k = int(((pa + pb) > 0).sum())
    tot = pa + pb
    small = (tot * min(pa.sum(), pb.sum()) / tot.sum() < MIN_EXPECTED).any()
    if k >= 2 and not small:
        return TwoSample("chi2", stat, k - 1, chi2_sf(stat, k - 1), na, len(b_tokens), k, pooled, _tv(pa, pb))
    if len(ids) < 2:  # one token: both sides always drew it
        return TwoSample("permutation", 0.0, 0, 1.0, na, len(b_tokens), 1, 0, 0.0)
    # Small counts: permutation test on the raw (unpooled) categories.
    rng = np.random.default_rng(PERM_SEED)
    obs = _statistic(ca.astype(float), cb.astype(float))
    labels = inv.copy()
    hits = 0
    for _ in range(PERM_RESAMPLES):
        rng.shuffle(labels)
        s = _statistic(np.bincount(labels[:na], minlength=len(ids)).astype(float),
                       np.bincount(labels[na:], minlength=len(ids)).astype(float))
        hits += s >= obs * (1 - 1e-12)
    p = (1 + hits) / (1 + PERM_RESAMPLES)
    return TwoSample("permutation", obs, len(ids) - 1, p, na, len(b_tokens), len(ids), 0, _tv(ca.astype(float), cb.astype(float)))


def detectable_tv(n_a: int, n_b: int, df: int, alpha: float, power: float = 0.8) -> float:
    """The smallest total-variation distance δ the χ² test detects with ``power`` at level ``alpha``.

    For any two distributions over the tested bins at total variation δ, the
    noncentrality of the two-sample χ² is λ = n_h Σ (p_i − q_i)² / m_i with
    n_h = n_a n_b / (n_a + n_b) and m the pooled distribution, and by
    Cauchy–Schwarz Σ (p_i − q_i)² / m_i ≥ (Σ |p_i − q_i|)² = 4δ². So
    λ ≥ 4 n_h δ² whatever the shape of the difference: solving
    ncx2_sf(crit, df, 4 n_h δ²) = power for δ gives a bound that holds for every
    alternative (larger λ only raises the power). It is the asymptotic
    (large-count) answer; for permutation-tested positions it is the same
    approximation.
    """
    if n_a <= 0 or n_b <= 0:
        return 1.0
    df = max(1, int(df))
    crit = chi2_isf(alpha, df)
    nh = n_a * n_b / (n_a + n_b)
    lo, hi = 0.0, 1.0
    if ncx2_sf(crit, df, 4 * nh) < power:
        return 1.0  # even a complete change would be missed this often
    for _ in range(60):
        mid = (lo + hi) / 2
        if ncx2_sf(crit, df, 4 * nh * mid * mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi

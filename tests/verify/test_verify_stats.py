"""The statistics of verify (expo_prof/verify/chi2.py, and the incomplete gamma of expo_prof/special.py) against
scipy, and their power claims by simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from expo_prof import special
from expo_prof.verify import chi2


@pytest.mark.parametrize("a, x", [(0.5, 0.1), (3, 2), (10, 30), (50.5, 40), (1, 100), (200, 180)])
def test_upper_incomplete_gamma_matches_scipy(a, x):
    """GIVEN (a, x) WHEN Q(a, x) is computed THEN it equals scipy's to 1e-10 (relative)."""
    assert special.gammainc_upper(a, x) == pytest.approx(stats.gamma.sf(x, a), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("df", [1, 4, 19, 120])
def test_chi2_sf_isf_and_noncentral_match_scipy(df):
    """GIVEN a df WHEN the χ² tail, its inverse and the noncentral tail are computed THEN they equal scipy's."""
    crit = chi2.chi2_isf(0.005, df)
    assert crit == pytest.approx(stats.chi2.isf(0.005, df), rel=1e-8)
    assert chi2.chi2_sf(crit, df) == pytest.approx(0.005, rel=1e-8)
    for nc in (0.5, 10.0, 80.0):
        assert chi2.ncx2_sf(crit, df, nc) == pytest.approx(stats.ncx2.sf(crit, df, nc), rel=1e-7, abs=1e-12)


def test_two_sample_chi2_equals_scipy_contingency():
    """GIVEN two large samples over 30 tokens WHEN tested THEN χ² and p equal scipy's chi2_contingency on the
    same (unpooled: every bin expects ≥ 5) table, and equal distributions are not rejected."""
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(30) * 5)
    a, b = rng.choice(30, 3000, p=p), rng.choice(30, 3000, p=p)
    r = chi2.two_sample(a, b)
    table = np.array([np.bincount(a, minlength=30), np.bincount(b, minlength=30)])
    ref = stats.chi2_contingency(table, correction=False)
    assert r.method == "chi2" and r.pooled_tokens == 0
    assert r.statistic == pytest.approx(ref.statistic) and r.p == pytest.approx(ref.pvalue, rel=1e-8)
    assert r.p > 1e-3


def test_rare_tokens_are_pooled_and_small_counts_permuted():
    """GIVEN a long tail of tokens seen once WHEN tested THEN they are pooled into one bin; GIVEN tiny samples
    THEN the permutation test answers, and a complete swap of tokens is found even then."""
    a = np.array([0] * 400 + list(range(100, 150)))
    b = np.array([0] * 400 + list(range(150, 200)))
    r = chi2.two_sample(a, b)
    assert r.method == "chi2" and r.pooled_tokens == 100 and r.bins == 2 and r.p > 0.5
    small = chi2.two_sample(np.array([1, 2, 3, 1, 2]), np.array([1, 2, 3, 3, 2]))
    assert small.method == "permutation" and small.p > 0.3
    swap = chi2.two_sample(np.array([1, 2] * 6), np.array([3, 4] * 6))
    assert swap.p < 0.01


def test_detectable_tv_is_detected_with_the_stated_power():
    """GIVEN the detectable TV for 600 samples a side over 8 bins at alpha 0.01 WHEN distributions that far apart
    (the worst case: mass moved between the two largest bins) are tested 300 times THEN they are rejected at
    least ~80 % of the time, and identical ones about 1 % of the time."""
    n, k, alpha = 600, 8, 0.01
    tv = chi2.detectable_tv(n, n, k - 1, alpha, 0.8)
    assert 0.05 < tv < 0.2
    base = np.full(k, 1 / k)
    base[0] = base[1] = 0.3
    base[2:] = 0.4 / (k - 2)
    alt = base.copy()
    alt[0] += tv
    alt[1] -= tv
    rng = np.random.default_rng(11)
    hits = sum(chi2.two_sample(rng.choice(k, n, p=base), rng.choice(k, n, p=alt)).p < alpha for _ in range(300))
    null = sum(chi2.two_sample(rng.choice(k, n, p=base), rng.choice(k, n, p=base)).p < alpha for _ in range(300))
    assert hits / 300 >= 0.74
    assert null / 300 <= 0.04
    assert chi2.detectable_tv(4 * n, 4 * n, k - 1, alpha) < tv  # more samples, smaller detectable difference

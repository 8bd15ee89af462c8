"""The statistics against reference values computed independently with scipy.

GIVEN samples (fixed and random), WHEN expo-prof's own numpy implementation
computes t distribution values, t-tests, confidence intervals, permutation
tests and runs needed, THEN they equal scipy's (scipy is only a test
dependency: the tool does not import it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as ss
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof import stats


def _mean_diff(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


@pytest.mark.parametrize("df", [1, 2, 3.7, 9, 30.5, 200])
def test_t_distribution_matches_scipy(df):
    # GIVEN a grid of t values and quantiles WHEN evaluated THEN sf/cdf/ppf agree with scipy to ~1e-11
    for t in (0.0, 0.05, 0.7, 1.96, 3.2, 12.0, 80.0):
        assert stats.t_sf(t, df) == pytest.approx(ss.t.sf(t, df), rel=1e-10, abs=1e-300)
        assert stats.t_cdf(-t, df) == pytest.approx(ss.t.cdf(-t, df), rel=1e-10, abs=1e-300)
    for q in (0.001, 0.1, 0.5, 0.8, 0.975, 0.995, 0.9999999):
        assert stats.t_ppf(q, df) == pytest.approx(ss.t.ppf(q, df), rel=1e-9, abs=1e-12)


def test_paired_t_and_ci_match_scipy():
    # GIVEN interleaved off/on runs
    off = np.array([1010.2, 1022.9, 1018.4, 1031.0, 1012.7])
    on = np.array([1031.8, 1040.1, 1047.9, 1049.5, 1030.2])
    # WHEN the paired t-test runs THEN t, df, p and the 95% CI equal scipy.stats.ttest_rel
    ref = ss.ttest_rel(on, off)
    ci = ref.confidence_interval(0.95)
    got = stats.paired_t(off, on)
    assert got.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert got.df == ref.df
    assert got.p == pytest.approx(ref.pvalue, rel=1e-9)
    assert (got.ci_low, got.ci_high) == (pytest.approx(ci.low, rel=1e-10), pytest.approx(ci.high, rel=1e-10))


def test_welch_t_and_ci_match_scipy():
    # GIVEN two independent sets with different spreads and sizes
    a = np.array([95.1, 97.3, 96.2, 99.0])
    b = np.array([99.5, 104.8, 101.1, 98.7, 106.0, 102.2])
    # WHEN Welch's test runs THEN it equals ttest_ind(equal_var=False), interval included
    ref = ss.ttest_ind(b, a, equal_var=False)
    ci = ref.confidence_interval(0.95)
    got = stats.welch_t(a, b)
    assert got.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert got.df == pytest.approx(ref.df, rel=1e-12)
    assert got.p == pytest.approx(ref.pvalue, rel=1e-9)
    assert got.ci_low == pytest.approx(ci.low, rel=1e-10) and got.ci_high == pytest.approx(ci.high, rel=1e-10)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(50, 150, allow_nan=False), min_size=2, max_size=9),
    st.lists(st.floats(-10, 10, allow_nan=False), min_size=9, max_size=9),
)
def test_t_tests_match_scipy_on_random_samples(base, shifts):
    # GIVEN random run values (paired: base and base+shift; unpaired: base vs shifted others)
    a = np.array(base)
    b = a + np.array(shifts[: len(a)])
    if np.std(b - a) < 1e-9 or np.std(a) < 1e-9:
        return  # degenerate spreads are covered by the zero-variance tests
    # WHEN both t-tests run THEN p-values and intervals match scipy
    for got, ref in ((stats.paired_t(a, b), ss.ttest_rel(b, a)), (stats.welch_t(a, b), ss.ttest_ind(b, a, equal_var=False))):
        ci = ref.confidence_interval(0.95)
        assert got.p == pytest.approx(ref.pvalue, rel=1e-8, abs=1e-14)
        assert got.ci_low == pytest.approx(ci.low, rel=1e-8, abs=1e-9)
        assert got.ci_high == pytest.approx(ci.high, rel=1e-8, abs=1e-9)


@pytest.mark.parametrize("n", [2, 3, 5, 8, 12])
def test_sign_flip_exact_matches_scipy(n):
    # GIVEN n pairs WHEN the exact sign-flip test runs THEN p equals scipy's exact paired permutation test
    rng = np.random.default_rng(n)
    off = rng.normal(100, 2, n)
    on = off + rng.normal(1.0, 1.5, n)
    ref = ss.permutation_test((on, off), _mean_diff, permutation_type="samples", n_resamples=np.inf,
                              vectorized=True, alternative="two-sided")
    got = stats.sign_flip_test(off, on)
    assert got.exact and got.arrangements == 2**n
    assert got.p == pytest.approx(ref.pvalue, rel=1e-12)
    assert got.min_p == pytest.approx(min(1.0, 2 / 2**n))


@pytest.mark.parametrize("na,nb", [(2, 2), (3, 3), (3, 5), (6, 6)])
def test_unpaired_permutation_exact_matches_scipy(na, nb):
    # GIVEN two independent sets WHEN the exact label permutation test runs THEN p equals scipy's
    rng = np.random.default_rng(na * 10 + nb)
    a = rng.normal(100, 3, na)
    b = rng.normal(103, 3, nb)
    ref = ss.permutation_test((b, a), _mean_diff, permutation_type="independent", n_resamples=np.inf,
                              vectorized=True, alternative="two-sided")
    got = stats.permutation_test(a, b)
    assert got.exact and got.arrangements == math.comb(na + nb, nb)
    assert got.p == pytest.approx(ref.pvalue, rel=1e-12)


def test_monte_carlo_sign_flip_is_close_to_exact():
    # GIVEN 18 pairs (2^18 > the exact limit) WHEN the test falls back to Monte Carlo
    rng = np.random.default_rng(7)
    off = rng.normal(100, 2, 18)
    on = off + rng.normal(0.6, 2.0, 18)
    got = stats.sign_flip_test(off, on)
    ref = ss.permutation_test((on, off), _mean_diff, permutation_type="samples", n_resamples=np.inf,
                              vectorized=True).pvalue
    # THEN it says so and lands within a few Monte Carlo standard errors of the exact p
    assert not got.exact and got.arrangements == stats.MC_RESAMPLES
    assert abs(got.p - ref) < 5 * math.sqrt(ref * (1 - ref) / stats.MC_RESAMPLES) + 2e-3


def _nct_power(delta, se, df, alpha=0.05):
    # Exact power of a two-sided t-test (noncentral t), computed independently with scipy.
    crit = ss.t.ppf(1 - alpha / 2, df)
    nc = delta / se
    return ss.nct.sf(crit, df, nc) + ss.nct.cdf(-crit, df, nc)


@pytest.mark.parametrize("delta,sd", [(2.0, 3.0), (0.5, 2.0), (10.0, 4.0)])
def test_runs_needed_paired_reaches_the_power_scipy_computes(delta, sd):
    # GIVEN an observed mean pair difference and spread WHEN the pairs needed are computed
    n = stats.runs_needed_paired(delta, sd)
    # THEN with n pairs the exact (noncentral t) power is about 80%, with one pair fewer it is lower
    assert n is not None and n >= 2
    assert _nct_power(delta, sd / math.sqrt(n), n - 1) >= 0.78
    if n > 2:
        assert _nct_power(delta, sd / math.sqrt(n - 1), n - 2) < 0.80


def test_runs_needed_unpaired_reaches_the_power_scipy_computes():
    # GIVEN an observed difference and two side variances WHEN runs per side are computed
    delta, va, vb = 1.5, 4.0, 6.0
    n = stats.runs_needed_unpaired(delta, va, vb)
    df = (n - 1) * (va + vb) ** 2 / (va**2 + vb**2)
    # THEN Welch's test with n runs per side has about 80% power (exact noncentral t)
    assert _nct_power(delta, math.sqrt((va + vb) / n), df) >= 0.78
    df1 = (n - 2) * (va + vb) ** 2 / (va**2 + vb**2)
    assert _nct_power(delta, math.sqrt((va + vb) / (n - 1)), df1) < 0.80


def test_runs_needed_edge_cases():
    # GIVEN no effect / no spread / a vanishing effect THEN None, 2, None (more than MAX_RUNS)
    assert stats.runs_needed_paired(0.0, 1.0) is None
    assert stats.runs_needed_paired(1.0, 0.0) == 2
    assert stats.runs_needed_unpaired(1e-6, 1.0, 1.0) is None


def test_zero_variance_t_tests_are_degenerate_not_errors():
    # GIVEN every pair differing by exactly the same amount WHEN tested
    off = np.array([100.0, 101.0, 102.0])
    t = stats.paired_t(off, off + 2.0)
    # THEN p = 0 and the interval collapses onto the difference; identical sides give p = 1
    assert t.p == 0.0 and t.ci_low == t.ci_high == pytest.approx(2.0)
    same = stats.paired_t(off, off.copy())
    assert same.p == 1.0 and same.diff == 0.0
    w = stats.welch_t(np.array([5.0, 5.0]), np.array([6.0, 6.0]))
    assert w.p == 0.0 and w.diff == 1.0


def test_modified_z_against_reference_runs():
    # GIVEN runs with one far value WHEN scored THEN the Iglewicz-Hoaglin score is 0.6745*(x-median)/MAD
    x = np.array([10.0, 10.2, 9.9, 10.1, 12.0])
    z = stats.modified_z(x)
    med, mad = np.median(x), np.median(np.abs(x - np.median(x)))
    assert z[-1] == pytest.approx(0.6745 * (12.0 - med) / mad)
    assert float(ss.median_abs_deviation(x)) == pytest.approx(stats.mad(x))

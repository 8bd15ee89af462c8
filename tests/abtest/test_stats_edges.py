"""Edges of expo_prof/stats.py (and the incomplete beta of expo_prof/special.py): degenerate samples, domain
limits, ties, Monte Carlo corrections, robust z.

GIVEN inputs at the edges each rule is written for (zero spread, infinite t,
x at 0 or 1, ties with the observed statistic, the exact-enumeration limit,
Monte Carlo with no resample as extreme as the data, MAD of 0), WHEN the
statistics are computed, THEN they equal scipy or a brute-force enumeration
written here, or the closed form the rule states.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as ss

from expo_prof import special, stats


def test_zero_spread_t_tests_have_every_field_degenerate():
    # GIVEN pairs that differ by exactly the same 2.0, and pairs that do not differ at all
    t = stats.paired_t([1.0, 2.0, 3.0], [3.0, 4.0, 5.0], confidence=0.9)
    # THEN: infinite statistic, p 0, a CI of width 0 at the difference, se 0, df n - 1
    assert (t.name, t.diff, t.se, t.statistic, t.df, t.p, t.ci_low, t.ci_high, t.confidence) == (
        "paired t", 2.0, 0.0, math.inf, 2.0, 0.0, 2.0, 2.0, 0.9)
    t = stats.paired_t([3.0, 4.0, 5.0], [1.0, 2.0, 3.0])
    assert t.statistic == -math.inf and t.ci_low == t.ci_high == -2.0
    t = stats.paired_t([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], confidence=0.8)
    assert (t.name, t.diff, t.se, t.statistic, t.df, t.p, t.ci_low, t.ci_high, t.confidence) == (
        "paired t", 0.0, 0.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.8)
    # AND Welch's test with both sides constant has df na + nb - 2 (the pooled df; Welch's formula is 0/0)
    w = stats.welch_t([5.0, 5.0, 5.0], [7.0, 7.0, 7.0, 7.0])
    assert (w.name, w.diff, w.se, w.df, w.p, w.ci_low, w.ci_high) == ("Welch t", 2.0, 0.0, 5.0, 0.0, 2.0, 2.0)


def test_t_test_fields_match_scipy():
    a, b = [10.0, 11.5, 9.0, 10.7], [11.0, 12.9, 9.4, 12.2]
    t = stats.paired_t(a, b, confidence=0.9)
    ref = ss.ttest_rel(b, a)
    d = np.array(b) - np.array(a)
    assert t.se == pytest.approx(np.std(d, ddof=1) / 2) and t.confidence == 0.9
    assert t.statistic == pytest.approx(ref.statistic) and t.df == 3.0
    ci = ref.confidence_interval(0.9)
    assert (t.ci_low, t.ci_high) == pytest.approx((ci.low, ci.high))
    w = stats.welch_t(a, b[:3], confidence=0.8)
    wref = ss.ttest_ind(b[:3], a, equal_var=False)
    assert w.confidence == 0.8 and w.df == pytest.approx(wref.df) and w.statistic == pytest.approx(wref.statistic)
    assert w.se == pytest.approx(np.sqrt(np.var(a, ddof=1) / 4 + np.var(b[:3], ddof=1) / 3))


def test_t_test_p_is_a_two_sided_probability_at_most_one():
    # GIVEN a tiny effect (t close to 0) THEN p = 2 · sf(|t|) as scipy, never above 1
    t = stats.welch_t([10.0, 11.0, 12.0], [10.0, 11.0, 12.001])
    ref = ss.ttest_ind([10.0, 11.0, 12.001], [10.0, 11.0, 12.0], equal_var=False)
    assert t.p == pytest.approx(ref.pvalue, rel=1e-9) and t.p <= 1.0
    t = stats.paired_t([1.0, 2.0, 3.0, 4.0], [1.5, 1.5, 3.5, 3.5])  # mean difference exactly 0, spread > 0
    assert t.statistic == 0.0 and t.p == 1.0


@pytest.mark.parametrize("call,msg", [
    (lambda: stats.paired_t([1.0], [2.0]), "a paired t-test needs at least 2 pairs"),
    (lambda: stats.welch_t([1.0], [2.0, 3.0]), "Welch's t-test needs at least 2 runs per side"),
    (lambda: stats.welch_t([1.0, 2.0], [3.0]), "Welch's t-test needs at least 2 runs per side"),
    (lambda: stats.sign_flip_test([], []), "no pairs"),
    (lambda: stats.t_ppf(0.0, 3), r"quantile 0.0 outside \(0, 1\)"),
    (lambda: stats.t_ppf(1.0, 3), r"quantile 1.0 outside \(0, 1\)"),
    (lambda: stats.t_ppf(1.5, 3), r"quantile 1.5 outside \(0, 1\)"),
])
def test_invalid_inputs_are_refused_with_the_reason(call, msg):
    with pytest.raises(ValueError, match=f"^{msg}$"):
        call()


def test_one_pair_sign_flip_is_exact_and_cannot_reject():
    # GIVEN one pair: 2 arrangements (+d, -d), the observed one is as extreme as the other
    r = stats.sign_flip_test([1.0], [3.0])
    assert r.exact and r.arrangements == 2 and r.p == 1.0 and r.min_p == 1.0 and r.statistic == 2.0


def test_t_distribution_edges():
    # GIVEN infinite / nan / zero t THEN the tails are the limits scipy gives
    for df in (1, 4.5, 30):
        assert stats.t_sf(math.inf, df) == 0.0 and stats.t_sf(-math.inf, df) == 1.0
        assert stats.t_cdf(math.inf, df) == 1.0 and stats.t_cdf(-math.inf, df) == 0.0
        assert math.isnan(stats.t_sf(math.nan, df))
        assert stats.t_sf(0.0, df) == 0.5
        # AND the median is exactly 0, the quantiles antisymmetric
        assert stats.t_ppf(0.5, df) == 0.0
        assert stats.t_ppf(0.025, df) == -stats.t_ppf(0.975, df)
        # AND the density equals scipy's (the Newton steps of t_ppf divide by it)
        for t in (0.0, 0.3, 2.0, -7.5):
            assert stats._t_pdf(t, df) == pytest.approx(ss.t.pdf(t, df), rel=1e-12)


@pytest.mark.parametrize("a,b", [(0.5, 0.5), (2.0, 0.5), (15.0, 0.5), (250.0, 0.5), (3.0, 7.0)])
def test_incomplete_beta_matches_scipy_including_the_ends(a, b):
    # GIVEN x at the ends THEN exactly 0 and 1 (no log of 0), and in between scipy's value
    assert special.betainc(a, b, 0.0) == 0.0 and special.betainc(a, b, -0.5) == 0.0
    assert special.betainc(a, b, 1.0) == 1.0 and special.betainc(a, b, 1.5) == 1.0
    # the switch between the two continued fractions sits at (a + 1) / (a + b + 2): test around it
    x0 = (a + 1.0) / (a + b + 2.0)
    band = ((a + 1.0) / (a + b + 2.0) + (a + 2.0) / (a + b + 2.0)) / 2  # just past the switch
    for x in (1e-6, 0.2, x0 * 0.97, x0, band, min(x0 * 1.03, (1 + x0) / 2), x0 + 0.5 * (1 - x0), 0.999999):
        assert special.betainc(a, b, x) == pytest.approx(sp.betainc(a, b, x), rel=1e-10, abs=1e-300)


@pytest.mark.parametrize("df", [1, 2.5, 7, 60, 500])
def test_t_quantiles_match_scipy_far_into_the_tails(df):
    for q in (0.6, 0.9, 0.975, 0.999, 1 - 1e-6, 1 - 1e-9, 0.3, 1e-4):
        assert stats.t_ppf(q, df) == pytest.approx(ss.t.ppf(q, df), rel=1e-11)


def test_ties_with_the_observed_statistic_count_on_both_sides():
    # GIVEN 3 pairs all +1: of the 8 sign patterns only "all +" reaches mean >= 1 (and only "all -" <= -1)
    r = stats.sign_flip_test([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    # THEN the tie is counted as "at least as extreme": p = 2 · 1/8 (scipy agrees)
    assert r.p == 0.25
    ref = ss.permutation_test(([1.0, 1.0, 1.0], [0.0, 0.0, 0.0]), lambda x, y, axis=-1: np.mean(x - y, axis=axis),
                              permutation_type="samples", n_resamples=np.inf, vectorized=True)
    assert ref.pvalue == pytest.approx(0.25)
    # AND the tie tolerance is relative to the statistic: tiny differences tie the same way
    assert stats.sign_flip_test([0.0] * 3, [1e-10] * 3).p == 0.25
    assert stats.sign_flip_test([0.0] * 3, [-1e-10] * 3).p == 0.25
    # AND a null value equal to an observed 0 counts on both sides (tolerance 0 there): p = 1, not 0.5
    assert stats.sign_flip_test([0.0, 0.0], [1.0, -1.0]).p == 1.0
    assert stats.permutation_test([0.0, 2.0], [2.0, 0.0]).p == 1.0
    # AND when every arrangement ties with the observed statistic (no difference at all) p is capped at 1
    assert stats.sign_flip_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]).p == 1.0
    assert stats.permutation_test([4.0, 4.0], [4.0, 4.0, 4.0]).p == 1.0
    # AND for the unpaired test: 2 vs 2 separated runs, 2 of the C(4, 2) = 6 splits are as extreme
    assert stats.permutation_test([0.0, 0.0], [1.0, 1.0]).p == pytest.approx(2 * 1 / 6)


def _brute_sign_flip_p(d):
    obs = np.mean(d)
    null = [np.mean(np.array(s) * d) for s in itertools.product((-1.0, 1.0), repeat=len(d))]
    tol = abs(obs) * 1e-12
    less = sum(x <= obs + tol for x in null) / len(null)
    greater = sum(x >= obs - tol for x in null) / len(null)
    return min(1.0, 2 * min(less, greater))


def test_exact_limit_is_inclusive():
    # GIVEN 16 pairs: 2**16 = EXACT_LIMIT arrangements -> still enumerated; 17 -> Monte Carlo
    d = np.random.default_rng(3).normal(0.3, 1.0, 17)
    assert 2**16 == stats.EXACT_LIMIT
    r16 = stats.sign_flip_test(np.zeros(16), d[:16])
    assert r16.exact and r16.arrangements == 2**16 and r16.min_p == 2 / 2**16
    assert r16.p == pytest.approx(_brute_sign_flip_p(d[:16]), rel=1e-12)
    r17 = stats.sign_flip_test(np.zeros(17), d)
    assert r17.exact is False and r17.arrangements == stats.MC_RESAMPLES
    assert r17.name == "sign-flip permutation" and r17.statistic == pytest.approx(d.mean())
    # AND the Monte Carlo p is within a few standard errors of the exact enumeration, and reproducible
    exact = _brute_sign_flip_p(d)
    assert abs(r17.p - exact) < 5 * math.sqrt(exact * (1 - exact) / stats.MC_RESAMPLES) + 1e-3
    assert stats.sign_flip_test(np.zeros(17), d).p == r17.p
    # AND for data with no clear effect (a p far from both ends) the resampled signs are fair +-1 coin flips
    d0 = np.random.default_rng(5).normal(0.0, 1.0, 17)
    exact0 = _brute_sign_flip_p(d0)
    assert 0.2 < exact0 < 0.9
    assert abs(stats.sign_flip_test(np.zeros(17), d0).p - exact0) < 5 * math.sqrt(exact0 * (1 - exact0) / stats.MC_RESAMPLES)


def test_unpaired_exact_limit_is_inclusive():
    # GIVEN 65535 runs vs 1: C(65536, 1) = 65536 = EXACT_LIMIT splits -> still enumerated exactly
    a, b = np.arange(65535.0), np.array([1e6])
    r = stats.permutation_test(a, b)
    # THEN exact, and the one B run above every A run is the most extreme of the 65536 splits: p = 2/65536
    assert r.exact is True and r.arrangements == 65536 and r.p == pytest.approx(2 / 65536) == r.min_p


def test_monte_carlo_p_never_reaches_zero():
    # GIVEN data more extreme than any resample can be (20 pairs all +1; 12 vs 12 fully separated runs)
    r = stats.sign_flip_test(np.zeros(20), np.ones(20))
    # THEN the p of a Monte Carlo test is (0 + 1) / (R + 1) per tail, doubled: its own min_p
    assert r.exact is False and r.p == pytest.approx(2 / (stats.MC_RESAMPLES + 1)) and r.min_p == r.p
    # (and the same in the lower tail: B below every arrangement)
    low = stats.sign_flip_test(np.zeros(20), -np.ones(20))
    assert low.p == pytest.approx(2 / (stats.MC_RESAMPLES + 1))
    assert stats.permutation_test(np.ones(12), np.zeros(12)).p == pytest.approx(2 / (stats.MC_RESAMPLES + 1))
    u = stats.permutation_test(np.zeros(12), np.ones(12))
    assert math.comb(24, 12) > stats.EXACT_LIMIT
    assert u.exact is False and u.name == "permutation" and u.statistic == 1.0
    assert u.p == pytest.approx(2 / (stats.MC_RESAMPLES + 1)) and u.min_p == u.p


def test_unpaired_permutation_fields_on_an_exact_case():
    # GIVEN 3 vs 4 runs THEN C(7, 4) = 35 splits, min_p 2/35, statistic = mean(b) - mean(a), p as scipy
    a, b = np.array([1.0, 2.0, 3.5]), np.array([2.5, 4.0, 5.0, 4.5])
    r = stats.permutation_test(a, b)
    ref = ss.permutation_test((b, a), lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                              permutation_type="independent", n_resamples=np.inf, vectorized=True).pvalue
    assert (r.name, r.exact, r.arrangements) == ("permutation", True, 35)
    assert r.min_p == pytest.approx(2 / 35) and r.statistic == pytest.approx(b.mean() - a.mean())
    assert r.p == pytest.approx(ref, rel=1e-12)
    # AND with 1 vs 1 run (2 splits) the smallest p is capped at 1
    assert stats.permutation_test([1.0], [2.0]).min_p == 1.0


def test_unpaired_monte_carlo_permutes_labels_within_each_resample():
    # GIVEN 9 vs 10 runs (C(19, 10) > limit) whose pooled values are 0..18: label-exchangeable resamples
    # keep each resample a permutation of the pooled runs, so the null mean difference is centred at 0
    a, b = np.arange(9.0), np.arange(9.0, 19.0)
    r = stats.permutation_test(a, b)
    assert not r.exact and r.p == pytest.approx(2 / (stats.MC_RESAMPLES + 1))
    # a half-overlapping split is judged like scipy's exact test, within Monte Carlo error
    a2, b2 = np.arange(0.0, 18.0, 2), np.arange(1.0, 20.0, 2)
    ref = ss.permutation_test((b2, a2), lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                              permutation_type="independent", n_resamples=200_000, vectorized=True,
                              random_state=1).pvalue
    got = stats.permutation_test(a2, b2).p
    assert abs(got - ref) < 5 * math.sqrt(ref * (1 - ref) / stats.MC_RESAMPLES) + 2e-3


def test_runs_needed_edges():
    # GIVEN no spread: 2 runs settle any nonzero difference; no difference: nothing to detect
    assert stats.runs_needed_paired(1.0, 0.0) == 2
    assert stats.runs_needed_paired(0.0, 1.0) is None
    assert stats.runs_needed_paired(1.0, math.inf) is None and stats.runs_needed_paired(1.0, math.nan) is None
    assert stats.runs_needed_unpaired(1.0, 0.0, 0.0) == 2
    assert stats.runs_needed_unpaired(0.0, 1.0, 1.0) is None
    assert stats.runs_needed_unpaired(0.0, 0.0, 0.0) is None  # no effect and no spread: still nothing to detect
    # AND a huge effect needs the minimum of 2 (not 3), a tiny one more than MAX_RUNS (None)
    assert stats.runs_needed_paired(1000.0, 1.0) == 2
    assert stats.runs_needed_unpaired(1000.0, 1.0, 1.0) == 2
    assert stats.runs_needed_paired(1e-3, 10.0) is None
    assert stats.runs_needed_unpaired(1e-3, 10.0, 10.0) is None


def _power_paired(delta, sd, n, alpha=0.05):
    # the shifted-central-t approximation the module documents, evaluated with scipy
    crit = ss.t.ppf(1 - alpha / 2, n - 1)
    return ss.t.sf(crit - abs(delta) / (sd / math.sqrt(n)), n - 1)


def _power_welch(delta, va, vb, n, alpha=0.05):
    df = (n - 1) * (va + vb) ** 2 / (va**2 + vb**2)
    return ss.t.sf(ss.t.ppf(1 - alpha / 2, df) - abs(delta) / math.sqrt((va + vb) / n), df)


@pytest.mark.parametrize("delta,sd", [(1.0, 1.0), (0.3, 1.0), (-0.7, 2.0), (0.1, 1.0), (3.0, 1.0), (2.0, 1.0)])
def test_runs_needed_is_the_smallest_n_reaching_the_power(delta, sd):
    n = stats.runs_needed_paired(delta, sd)
    assert isinstance(n, int)
    # THEN n reaches 80 % power (scipy) and n - 1 does not (or n is the minimum of 2)
    assert _power_paired(delta, sd, n) >= 0.8
    assert n == 2 or _power_paired(delta, sd, n - 1) < 0.8


@pytest.mark.parametrize("delta,va,vb", [(1.0, 1.0, 4.0), (0.2, 1.0, 0.25), (-2.0, 9.0, 1.0), (3.0, 1.0, 1.0),
                                         (2.0, 1.0, 2.0), (5.0, 4.0, 1.0), (1.5, 0.5, 0.5)])
def test_runs_needed_unpaired_is_the_smallest_n_reaching_the_power(delta, va, vb):
    n = stats.runs_needed_unpaired(delta, va, vb)
    assert isinstance(n, int)
    assert _power_welch(delta, va, vb, n) >= 0.8
    assert n == 2 or _power_welch(delta, va, vb, n - 1) < 0.8


def test_mad_and_modified_z():
    # GIVEN an empty sample THEN MAD is nan (no spread to speak of)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no numpy "mean of empty slice" warning on the way
        assert math.isnan(stats.mad([]))
    assert stats.mad([1, 2, 3, 4, 100]) == 1.0
    # GIVEN a reference with MAD > 0 THEN z = 0.6745 (x - median) / MAD
    z = stats.modified_z(np.array([10.0, 14.0]), np.array([1.0, 2.0, 3.0, 4.0, 100.0]))
    assert z == pytest.approx([0.6745 * 7.0, 0.6745 * 11.0])
    # GIVEN a reference with MAD 0 but a nonzero mean absolute deviation THEN z = (x - median) / (1.2533 · meanAD)
    ref = np.array([5.0, 5.0, 5.0, 5.0, 9.0])  # median 5, MAD 0, mean |dev| = 0.8
    z = stats.modified_z(np.array([9.0, 3.0, 5.0]), ref)
    assert z == pytest.approx([4.0 / (1.2533 * 0.8), -2.0 / (1.2533 * 0.8), 0.0])
    # GIVEN a constant reference THEN equal values score 0 and the others +-inf, with no floating-point warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z = stats.modified_z(np.array([7.0, 8.0, 6.0]), np.array([7.0, 7.0, 7.0]))
    assert z.tolist() == [0.0, math.inf, -math.inf]
    # AND integers are scored like the same floats
    assert stats.modified_z([1, 2, 3, 4, 100]).tolist() == stats.modified_z([1.0, 2.0, 3.0, 4.0, 100.0]).tolist()

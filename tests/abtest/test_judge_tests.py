"""The judging rules of abtest/judging/judge.py on inputs that reach each branch, checked against scipy.

GIVEN run values built to sit on each side of a rule (the t-test and the
permutation test disagreeing, too few arrangements, Monte Carlo permutation),
WHEN judged, THEN the outcome, p-values and notes say what the rule says.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as ss

from expo_prof import stats
from expo_prof.abtest.judging.judge import metric_result
from expo_prof.abtest.metrics import METRICS
from expo_prof.abtest.model import BETTER, SAME

TOKS = METRICS["output_throughput"]


def _paired(diffs, base=100.0, alpha=0.05):
    a = [base + i for i in range(len(diffs))]
    b = [x + d for x, d in zip(a, diffs)]
    labels = [f"r{i}" for i in range(len(diffs))]
    return metric_result(TOKS, labels, a, [""] * len(a), labels, b, [""] * len(b),
                         [(i, i) for i in range(len(diffs))], alpha)


def test_permutation_test_vetoes_a_t_test_it_contradicts():
    # GIVEN 6 interleaved pairs whose differences are [1.0, 1.1, 0.9, 1.05, 0.95, -0.1]
    diffs = [1.0, 1.1, 0.9, 1.05, 0.95, -0.1]
    r = _paired(diffs)
    # THEN the paired t-test alone would call it significant (p = 0.007, as scipy computes) ...
    ref_t = ss.ttest_1samp(diffs, 0.0).pvalue
    assert r.t_test.p == pytest.approx(ref_t, rel=1e-9) and r.t_test.p < 0.05
    # ... but the exact sign-flip test (p = 0.0625 >= alpha, and it could reach 2/64 < alpha) disagrees
    assert r.permutation.exact and r.permutation.p == pytest.approx(0.0625)
    assert r.permutation.min_p <= 0.05
    # AND so the metric is not settled: no significance, no "better", a note that says why
    assert r.significant is False and r.outcome == SAME
    assert any("sign-flip permutation test disagrees" in n and "p=0.0625" in n for n in r.notes)
    assert r.runs_needed is not None


def test_a_permutation_p_equal_to_alpha_is_not_below_it_and_still_vetoes():
    # GIVEN the same 6 pairs judged at alpha = 0.0625: the sign-flip p is alpha itself, and its
    # smallest possible p (2/64) is below alpha, so it could have agreed
    r = _paired([1.0, 1.1, 0.9, 1.05, 0.95, -0.1], alpha=0.0625)
    assert r.permutation.p == 0.0625 and r.permutation.min_p < 0.0625 and r.t_test.p < 0.0625
    # THEN p == alpha is not significant for the permutation test either: it disagrees, not settled
    assert r.significant is False and r.outcome == SAME
    assert any("sign-flip permutation test disagrees" in n for n in r.notes)


def test_agreeing_tests_settle_the_metric():
    # GIVEN 6 pairs that all gained about 1 tok/s: both tests agree (sign-flip p = 2/64)
    r = _paired([1.0, 1.1, 0.9, 1.05, 0.95, 1.02])
    assert r.t_test.p < 0.05 and r.permutation.p == pytest.approx(2 / 64)
    assert r.significant is True and r.outcome == BETTER
    assert not any("disagrees" in n for n in r.notes)


def test_too_few_pairs_leave_the_decision_to_the_t_test_and_say_so():
    # GIVEN 4 pairs: the sign-flip test cannot go below 2/16 = 0.125 > alpha
    r = _paired([1.0, 1.1, 0.9, 1.05])
    assert r.permutation.min_p == pytest.approx(0.125)
    assert r.significant is True and r.outcome == BETTER
    assert any("cannot go below p=0.125" in n and "t-test" in n for n in r.notes)


def test_unpaired_monte_carlo_permutation_is_close_to_exact():
    # GIVEN 10 vs 9 unpaired runs: C(19, 9) = 92378 arrangements, over the exact limit
    rng = np.random.default_rng(11)
    a = rng.normal(100, 2, 10)
    b = rng.normal(101.5, 2, 9)
    assert math.comb(19, 9) > stats.EXACT_LIMIT
    got = stats.permutation_test(a, b)
    ref = ss.permutation_test((b, a), lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                              permutation_type="independent", n_resamples=np.inf, vectorized=True).pvalue
    # THEN it says it resampled, and lands within a few Monte Carlo standard errors of the exact p
    assert not got.exact and got.arrangements == stats.MC_RESAMPLES
    assert got.min_p == pytest.approx(2.0 / (stats.MC_RESAMPLES + 1))
    assert got.statistic == pytest.approx(b.mean() - a.mean())
    assert abs(got.p - ref) < 5 * math.sqrt(ref * (1 - ref) / stats.MC_RESAMPLES) + 2e-3
    # AND the same data give the same p (seeded resampling)
    assert stats.permutation_test(a, b).p == got.p

"""Every field of one judged metric (abtest/judging/judge.py ``metric_result``), checked against independent figures.

GIVEN small hand-made A/B run values (paired and unpaired, some runs lacking
the metric), WHEN one metric is judged, THEN each field of the result equals
what the statistics module of the standard library and scipy compute from the
same values: side means and sds (``statistics``), the Welch / paired t-test and
its 95 % CI (``scipy.stats.ttest_ind`` / ``ttest_rel``), the exact permutation
tests (``scipy.stats.permutation_test``), and the notes say exactly which runs
were left out and why.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import scipy.stats as ss

from expo_prof import stats
from expo_prof.abtest.judging.judge import metric_result
from expo_prof.abtest.metrics import METRICS
from expo_prof.abtest.model import BETTER, MISSING, SAME, UNTESTABLE, WORSE

TPOT = METRICS["mean_tpot_ms"]  # lower is better, a serving metric
HIDDEN = METRICS["hidden_exp_us_per_step"]  # higher is better, a mechanism metric
ALPHA = 0.05


def _labels(prefix, n):
    return [f"{prefix}{i}" for i in range(n)]


def _judge(metric, a_vals, b_vals, pairs=None, a_flags=None, b_flags=None, alpha=ALPHA):
    return metric_result(metric, _labels("a", len(a_vals)), list(a_vals), a_flags or [""] * len(a_vals),
                         _labels("b", len(b_vals)), list(b_vals), b_flags or [""] * len(b_vals), pairs, alpha)


def _mean_diff(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def _check_side(side, labels, vals, flags):
    present = [v for v in vals if v is not None]
    assert side.runs == labels and side.values == vals and side.flags == flags
    assert side.n == len(present)
    assert side.mean == pytest.approx(statistics.mean(present))
    assert side.sd == pytest.approx(statistics.stdev(present)) if len(present) >= 2 else side.sd is None


def test_unpaired_metric_every_field_matches_scipy():
    # GIVEN 5 runs off (one lacks the metric, one flagged) and 4 runs on, TPOT lower on every B run
    a_vals = [40.0, 41.0, None, 39.5, 40.5]
    b_vals = [38.0, 38.6, 37.9, 38.3]
    a_flags = ["", "outlier", "", "", ""]
    r = _judge(TPOT, a_vals, b_vals, a_flags=a_flags)
    a = np.array([40.0, 41.0, 39.5, 40.5])
    b = np.array(b_vals)
    # THEN the metric's own description is carried over
    assert (r.name, r.label, r.unit, r.better, r.mechanism) == ("mean_tpot_ms", "TPOT mean", "ms", "lower", False)
    # AND each side lists every run (None where absent) with statistics' mean and sample sd of the present ones
    _check_side(r.a, _labels("a", 5), a_vals, a_flags)
    _check_side(r.b, _labels("b", 4), b_vals, [""] * 4)
    # AND diff / change / CI are those of Welch's test as scipy computes it
    ref = ss.ttest_ind(b, a, equal_var=False)
    ci = ref.confidence_interval(0.95)
    diff = statistics.mean(b_vals) - statistics.mean(a)
    assert r.diff == pytest.approx(diff)
    assert r.change_pct == pytest.approx(100 * diff / statistics.mean(a))
    assert r.ci_diff == pytest.approx([ci.low, ci.high], rel=1e-9)
    assert r.ci_pct == pytest.approx([100 * ci.low / a.mean(), 100 * ci.high / a.mean()], rel=1e-9)
    assert r.t_test.name == "Welch t" and r.t_test.exact is None and r.t_test.arrangements is None
    assert r.t_test.statistic == pytest.approx(ref.statistic, rel=1e-9)
    assert r.t_test.df == pytest.approx(ref.df, rel=1e-9)
    assert r.t_test.p == pytest.approx(ref.pvalue, rel=1e-9)
    # AND the permutation test is the exact one over C(8, 4) = 70 splits (B all lower: p = 2/70)
    pref = ss.permutation_test((b, a), _mean_diff, permutation_type="independent", n_resamples=np.inf,
                               vectorized=True).pvalue
    assert r.permutation.name == "permutation" and r.permutation.exact is True
    assert r.permutation.arrangements == math.comb(8, 4) and r.permutation.min_p == pytest.approx(2 / 70)
    assert r.permutation.p == pytest.approx(pref) == pytest.approx(2 / 70)
    assert r.permutation.statistic == pytest.approx(diff) and r.permutation.df is None
    # AND both tests agree: a lower TPOT is better, settled (no runs-needed estimate)
    assert r.significant is True and r.outcome == BETTER and r.runs_needed is None
    assert r.paired is False and r.pairs == 0
    assert r.notes == ["present in 4 of 5 runs of side A"]


def test_higher_is_better_mechanism_metric_that_dropped_is_worse():
    # GIVEN a mechanism metric where higher is better, and B lower than A on every run
    a_vals, b_vals = [10.0, 10.4, 9.8, 10.1], [8.0, 8.3, 7.9, 8.1]
    r = _judge(HIDDEN, a_vals, b_vals)
    # THEN it is described as such, and the drop is WORSE (not BETTER as for a lower-is-better metric)
    assert (r.better, r.mechanism, r.unit) == ("higher", True, "µs")
    assert r.significant is True and r.outcome == WORSE
    assert r.notes == []
    _check_side(r.b, _labels("b", 4), b_vals, [""] * 4)


def test_paired_metric_with_an_incomplete_pair_matches_scipy():
    # GIVEN 7 interleaved pairs, one B run lacking the metric, differences that do not settle anything
    a_vals = [100.0, 101.0, 99.0, 100.5, 102.0, 98.5, 100.2]
    d = np.random.default_rng(7).normal(0.1, 1.0, 7)  # no two sign patterns tie (scipy counts ties by float noise)
    b_vals = [x + dx for x, dx in zip(a_vals, d)]
    b_vals[3] = None
    pairs = [(i, i) for i in range(7)]
    r = _judge(TPOT, a_vals, b_vals, pairs=pairs)
    keep = [i for i in range(7) if i != 3]
    pa, pb = np.array([a_vals[i] for i in keep]), np.array([b_vals[i] for i in keep])
    ref = ss.ttest_rel(pb, pa)
    ci = ref.confidence_interval(0.95)
    # THEN the paired t-test and its CI use the 6 complete pairs only
    assert r.paired is True and r.pairs == 6
    assert r.t_test.name == "paired t" and r.t_test.df == pytest.approx(5.0)
    assert r.t_test.statistic == pytest.approx(ref.statistic, rel=1e-9)
    assert r.t_test.p == pytest.approx(ref.pvalue, rel=1e-9)
    assert r.ci_diff == pytest.approx([ci.low, ci.high], rel=1e-9)
    # AND the sign-flip test enumerates 2**6 arrangements, as scipy's paired permutation test does
    pref = ss.permutation_test((pb, pa), _mean_diff, permutation_type="samples", n_resamples=np.inf,
                               vectorized=True).pvalue
    assert r.permutation.name == "sign-flip permutation" and r.permutation.arrangements == 64
    assert r.permutation.p == pytest.approx(pref, rel=1e-12)
    assert r.permutation.min_p == pytest.approx(2 / 64)
    # AND diff / change are of the side means (all runs that have it), not of the pairs
    diff = statistics.mean(pb) - statistics.mean(a_vals)
    assert r.diff == pytest.approx(diff) and r.change_pct == pytest.approx(100 * diff / statistics.mean(a_vals))
    # AND not significant, so the pairs needed come from the complete pairs' differences (sample sd)
    dd = pb - pa
    assert r.significant is False and r.outcome == SAME
    assert r.runs_needed == stats.runs_needed_paired(statistics.mean(dd), statistics.stdev(dd), ALPHA)
    assert r.runs_needed is not None and r.runs_needed > 6
    assert r.notes == ["present in 6 of 7 runs of side B", "1 pair(s) without this metric left out of the paired test"]


def test_unpaired_not_significant_runs_needed_uses_sample_variances():
    # GIVEN 4 vs 5 unpaired runs with heavily overlapping values
    a_vals = [100.0, 103.0, 98.0, 101.0]
    b_vals = [101.0, 99.5, 104.0, 100.0, 102.5]
    r = _judge(TPOT, a_vals, b_vals)
    # THEN nothing is settled, and the runs needed are those for Welch's test with the sample variances
    assert r.significant is False and r.outcome == SAME
    want = stats.runs_needed_unpaired(statistics.mean(b_vals) - statistics.mean(a_vals),
                                      statistics.variance(a_vals), statistics.variance(b_vals), ALPHA)
    assert r.runs_needed == want and want is not None
    assert r.notes == []


@pytest.mark.parametrize("a_vals,b_vals,note", [
    ([1.0, 2.0, 3.0], [None, None, None], ["missing on side B (0 of 3 runs have it)"]),
    ([None, None], [1.0, 2.0, 3.0], ["missing on side A (0 of 2 runs have it)"]),
    ([None], [None, None], ["missing on side A (0 of 1 runs have it)", "missing on side B (0 of 2 runs have it)"]),
])
def test_a_metric_missing_on_a_side_is_reported_not_tested(a_vals, b_vals, note):
    # GIVEN a side where no run has the metric WHEN judged THEN it is MISSING, with no figures at all
    r = _judge(TPOT, a_vals, b_vals)
    assert r.outcome == MISSING and r.notes == note
    assert r.diff is r.change_pct is r.ci_diff is r.ci_pct is r.t_test is r.permutation is r.significant is None
    assert r.pairs == 0 and r.paired is False and r.runs_needed is None
    for side in (r.a, r.b):  # a side without values has no mean / sd (not nan)
        if side.n == 0:
            assert side.mean is None and side.sd is None


@pytest.mark.parametrize("a_vals,b_vals,pairs,why,n_pairs", [
    ([10.0, 11.0], [12.0, None], [(0, 0), (1, 1)], "only one complete pair", 1),
    ([10.0, None], [None, 12.0], [(0, 0), (1, 1)], "no complete pair", 0),
    ([10.0], [12.0], None, "one run per side", 0),
    ([10.0], [12.0, 13.0, 12.5], None, "only one run on side A", 0),
    ([10.0, 11.0, 10.5], [12.0], None, "only one run on side B", 0),
])
def test_too_few_runs_give_the_change_as_an_observation_only(a_vals, b_vals, pairs, why, n_pairs):
    # GIVEN fewer than 2 pairs (paired) or 1 run on a side (unpaired)
    r = _judge(TPOT, a_vals, b_vals, pairs=pairs)
    a = [v for v in a_vals if v is not None]
    b = [v for v in b_vals if v is not None]
    # THEN the change of the means is shown, but no CI or test, and the note says why
    assert r.outcome == UNTESTABLE and r.significant is None
    assert r.diff == pytest.approx(statistics.mean(b) - statistics.mean(a))
    assert r.change_pct == pytest.approx(100 * (statistics.mean(b) - statistics.mean(a)) / statistics.mean(a))
    assert r.ci_diff is r.ci_pct is r.t_test is r.permutation is r.runs_needed is None
    assert r.paired is (pairs is not None) and r.pairs == n_pairs
    _check_side(r.a, _labels("a", len(a_vals)), a_vals, [""] * len(a_vals))  # sd from 2 values, None from 1
    _check_side(r.b, _labels("b", len(b_vals)), b_vals, [""] * len(b_vals))
    assert r.notes[-1] == (f"{why}: no confidence interval or test is possible; the change is an observation only "
                           "(run 3+ per side)")


def test_zero_mean_baseline_has_no_relative_change():
    # GIVEN a baseline whose mean is 0 WHEN judged THEN diff and its CI exist, relative figures do not
    r = _judge(TPOT, [-1.0, 1.0, 0.0], [2.0, 3.0, 2.5])
    assert r.diff == pytest.approx(2.5)
    assert r.change_pct is None and r.ci_pct is None and r.ci_diff is not None


@pytest.mark.parametrize("pairs", [None, [(0, 0), (1, 1), (2, 2)]])
def test_zero_variance_is_named_and_the_statistic_is_not_infinite(pairs):
    # GIVEN every pair differing by exactly 2.0 (paired: over a varying baseline) or constant sides (unpaired)
    a_vals = [10.0, 11.0, 12.5] if pairs else [10.0, 10.0, 10.0]
    r = _judge(TPOT, a_vals, [v + 2.0 for v in a_vals], pairs=pairs)
    what = "pair differed" if pairs else "run of each side measured"
    # THEN the note names the degenerate test, and the infinite t statistic is stored as null (JSON has no inf)
    assert (f"zero variance: every {what} exactly the same, so the t-test degenerates (p is 0 or 1); "
            "more runs would show the real spread") in r.notes
    assert r.t_test.statistic is None and r.t_test.p == 0.0
    # AND its p = 0 decides nothing: the permutation test cannot reach alpha with 3 runs (pairs), so not testable,
    # without the t-test's point CI
    assert r.outcome == UNTESTABLE and r.significant is None and r.decided_by is None
    assert r.ci_diff is None and r.ci_pct is None and r.runs_needed is None


@pytest.mark.parametrize("pairs", [None, [(i, i) for i in range(6)]])
def test_zero_variance_is_judged_by_the_permutation_test_alone(pairs):
    # GIVEN every pair (6 pairs) differing by exactly +2.0 / constant sides (6 runs each): enough runs for the
    # permutation test to go below alpha (2/2^6, 2/C(12,6))
    a_vals = [10.0, 11.0, 12.5, 9.0, 10.5, 11.5] if pairs else [10.0] * 6
    r = _judge(TPOT, a_vals, [v + 2.0 for v in a_vals], pairs=pairs)
    ref = (ss.permutation_test(([v + 2.0 for v in a_vals], a_vals), _mean_diff, permutation_type="samples",
                               n_resamples=np.inf, alternative="two-sided").pvalue if pairs
           else 2 / math.comb(12, 6))
    # THEN that test decides (TPOT +2: worse), at scipy's p, and the degenerate t-test only stays on record
    assert r.decided_by == "permutation" and r.permutation.p == pytest.approx(ref)
    assert r.significant is True and r.outcome == WORSE and r.ci_diff is None
    assert r.notes[-1] == f"the t-test cannot judge runs without spread: the {r.permutation.name} test decides (p={ref:.3g})"


def test_one_constant_side_is_not_zero_variance():
    # GIVEN side A constant but side B spread out (unpaired) THEN the t-test is fine: no zero-variance note
    r = _judge(TPOT, [10.0, 10.0, 10.0], [12.0, 13.5, 11.0])
    assert not any(n.startswith("zero variance") for n in r.notes)
    r = _judge(TPOT, [10.0, 11.5, 9.0], [12.0, 12.0, 12.0])
    assert not any(n.startswith("zero variance") for n in r.notes)


@pytest.mark.parametrize("a_vals,b_vals,constant", [
    # relative tolerance: 1e-4 apart at 1e6 is float noise of the inputs' digits (1e-9 · 1e6 = 1e-3) ...
    ([1e6, 1e6, 1e6 + 1e-4], [1e6 + 5, 1e6 + 5, 1e6 + 5], True),
    # ... the tolerance is inclusive: exactly 1e-9 apart near 0 is still "equal" ...
    ([0.0, 0.0, 1e-9], [1.0, 1.0, 1.0], True),
    # ... but 1.5e-9 near 0 is not (the absolute floor is 1e-9, not more), nor are values 1 apart
    ([0.0, 0.0, 1.5e-9], [1.0, 1.0, 1.0], False),
    ([1.0, 2.0, 1.5], [3.0, 3.0, 3.0], False),
])
def test_zero_variance_tolerance_is_relative_with_an_absolute_floor(a_vals, b_vals, constant):
    # GIVEN side B exactly constant and side A equal up to the given difference (unpaired)
    r = _judge(TPOT, a_vals, b_vals)
    # THEN side A counts as constant only within max(1, |x|) · 1e-9
    assert any(n.startswith("zero variance") for n in r.notes) is constant


@pytest.mark.parametrize("a_vals,b_vals,pairs,runs", [
    ([100.0, 101.0, 99.0, 100.5], [103.0, 104.1, 101.9, 103.45], [(0, 0), (1, 1), (2, 2), (3, 3)], "4 pairs"),
    ([100.0, 100.4, 99.8], [103.0, 103.5, 102.8], None, "3 runs per side"),
    ([100.0, 100.4], [103.0, 103.5, 102.8], None, "2 vs 3 runs"),
])
def test_too_few_arrangements_leave_the_decision_to_the_t_test(a_vals, b_vals, pairs, runs):
    # GIVEN so few runs that the permutation test's smallest p is above alpha
    r = _judge(TPOT, a_vals, b_vals, pairs=pairs)
    n = len(a_vals) + len(b_vals)
    min_p = 2 / 2 ** len(a_vals) if pairs else 2 / math.comb(n, len(b_vals))
    name = "sign-flip permutation" if pairs else "permutation"
    # THEN the note gives the run counts and that floor, and the t-test alone decides (here: worse TPOT)
    assert r.permutation.min_p == pytest.approx(min_p) and min_p > ALPHA
    assert r.notes == [f"with {runs} the {name} test cannot go below p={min_p:.3g}; "
                       "the t-test (normal errors assumed) decides"]
    assert r.significant is (r.t_test.p < ALPHA) and r.significant is True and r.outcome == WORSE


def test_alpha_is_the_threshold_of_the_t_test():
    # GIVEN data whose paired t p-value is below 0.05, judged at 0.05 and just below that p
    d = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02, -0.2, 1.3]
    a = [100.0 + i for i in range(8)]
    b = [x + dx for x, dx in zip(a, d)]
    pairs = [(i, i) for i in range(8)]
    p = float(ss.ttest_rel(b, a).pvalue)
    assert p < 0.05
    # THEN it is significant at 0.05 and not at a level below its p
    assert _judge(TPOT, a, b, pairs=pairs).significant is True
    lo = _judge(TPOT, a, b, pairs=pairs, alpha=p * 0.9)
    assert lo.significant is False and lo.outcome == SAME


def test_significance_is_strict_at_alpha_and_no_veto_at_the_permutation_floor():
    # GIVEN 6 pairs that all improve TPOT a little, and alpha set exactly to the t-test's p
    a = [50.0, 51.0, 49.5, 50.5, 50.2, 49.8]
    b = [x - d for x, d in zip(a, [1.0, 1.2, 0.8, 1.1, 0.9, 1.05])]
    pairs = [(i, i) for i in range(6)]
    p = _judge(TPOT, a, b, pairs=pairs).t_test.p
    # THEN p < alpha is required: at alpha == p the metric is not significant
    assert _judge(TPOT, a, b, pairs=pairs, alpha=p).significant is False
    # GIVEN 5 pairs all the same sign: the sign-flip p is its floor 2/32; judged at alpha = 2/32 exactly
    r = _judge(TPOT, a[:5], b[:5], pairs=pairs[:5], alpha=2 / 32)
    # THEN the permutation test cannot go below alpha (p < alpha is impossible for it): it cannot
    # contradict the t-test, which decides, and the note says so (a veto here could never be lifted)
    assert r.permutation.min_p == r.permutation.p == 2 / 32 and r.t_test.p < 2 / 32
    assert r.significant is True and r.outcome == BETTER
    assert not any("disagrees" in n for n in r.notes)
    assert any("cannot go below" in n for n in r.notes)
    # AND just above that alpha the permutation test can go below it, and all-same-sign pairs agree
    r2 = _judge(TPOT, a[:5], b[:5], pairs=pairs[:5], alpha=0.07)
    assert r2.significant is True and not any("disagrees" in n or "cannot go below" in n for n in r2.notes)


def test_a_small_significant_change_keeps_its_direction():
    # GIVEN a TPOT drop of 0.1 ms (well below 1 in absolute terms), clearly significant
    r = _judge(TPOT, [1.00, 1.01, 0.99, 1.00, 1.005], [0.90, 0.91, 0.89, 0.90, 0.905])
    assert r.significant is True and r.outcome == BETTER
    r = _judge(TPOT, [0.90, 0.91, 0.89, 0.90, 0.905], [1.00, 1.01, 0.99, 1.00, 1.005])
    assert r.significant is True and r.outcome == WORSE


@pytest.mark.parametrize("pairs", [None, [(i, i) for i in range(4)]])
def test_runs_needed_uses_the_given_alpha(pairs):
    # GIVEN overlapping sides judged at alpha 0.01 (not the default 0.05)
    a = [100.0, 103.0, 98.0, 101.0]
    b = [101.0, 99.5, 104.0, 100.0]
    r = _judge(TPOT, a, b, pairs=pairs, alpha=0.01)
    if pairs:
        d = [y - x for x, y in zip(a, b)]
        want = stats.runs_needed_paired(statistics.mean(d), statistics.stdev(d), 0.01)
    else:
        want = stats.runs_needed_unpaired(statistics.mean(b) - statistics.mean(a), statistics.variance(a),
                                          statistics.variance(b), 0.01)
    assert r.outcome == SAME and r.runs_needed == want
    # a stricter alpha needs more runs than the default would
    assert want is not None and want > (stats.runs_needed_paired(statistics.mean(d), statistics.stdev(d)) if pairs else
                                         stats.runs_needed_unpaired(statistics.mean(b) - statistics.mean(a),
                                                                    statistics.variance(a), statistics.variance(b)))

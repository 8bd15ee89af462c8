"""The confidence sequence that lets a switchback decide as it runs (expo_prof/analysis/saving/sequential.py).

GIVEN per-pair savings WHEN the sequence is computed THEN its boundary is the published formula, it decides
enable / keep off / no effect beyond the margin / undecided as documented, a decision once taken stands, the
settle estimate is the first pair count at which the boundary settles, and — on GENERATED series with no
effect — looking after every pair keeps the false-decision rate at its level while the fixed-horizon CI looked
at as often does not (the real step series are bench/sim_sequential.py's).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from expo_prof import stats
from expo_prof.analysis.saving import sequential as sq
from expo_prof.words import ENABLE, KEEP_OFF, NO_EFFECT, UNDECIDED


def test_boundary_is_the_published_formula():
    # GIVEN sd, n, alpha and the rho^2 tuned for n* = 50 (Waudby-Smith et al.: the width is smallest near that many pairs)
    alpha, n, sd = 0.05, 37, 3.0
    rho2 = sq.rho2_for(50, alpha)
    assert rho2 == pytest.approx((-2 * math.log(alpha) + math.log(-2 * math.log(alpha) + 1)) / 50)
    # THEN the half-width is sd * sqrt(2(n rho^2 + 1) / (n^2 rho^2) * log(sqrt(n rho^2 + 1) / alpha))
    want = sd * math.sqrt(2 * (n * rho2 + 1) / (n * n * rho2) * math.log(math.sqrt(n * rho2 + 1) / alpha))
    assert float(sq.half_width(sd, n, rho2, alpha)) == pytest.approx(want, rel=1e-12)
    # AND it is wider than the fixed-horizon t interval at the same n (the price of looking at every pair)
    assert want > stats.t_ppf(0.975, n - 1) * sd / math.sqrt(n)


@pytest.mark.parametrize(("mean", "sd", "margin", "want"), [
    (500.0, 100.0, 10.0, ENABLE),
    (-500.0, 100.0, 10.0, KEEP_OFF),
    (0.0, 1.0, 50.0, NO_EFFECT),
    (5.0, 400.0, 10.0, UNDECIDED),
])
def test_each_decision(mean, sd, margin, want):
    # GIVEN 40 pairs around ``mean`` WHEN the sequence decides THEN the documented word
    d = np.random.default_rng(3).normal(mean, sd, 40)
    s = sq.sequence(d, margin)
    assert s.decision == want
    if want == UNDECIDED:
        assert s.settled_at is None and s.pairs_needed is not None and s.pairs_needed > 0
    else:
        assert s.settled_at is not None and sq.MIN_PAIRS <= s.settled_at <= 40 and s.pairs_needed is None


def test_no_decision_before_min_pairs_and_a_decision_once_taken_stands():
    # GIVEN a strong effect WHEN fewer than MIN_PAIRS pairs are seen THEN no bounds and no decision
    d = np.random.default_rng(4).normal(1000.0, 10.0, 60)
    early = sq.sequence(d[: sq.MIN_PAIRS - 1], 1.0)
    assert early.lo_ns is None and early.decision == UNDECIDED
    # AND from the first settling look on, every longer prefix says the same decision, settled at the same pair,
    # with the mean inside its bounds (the figure at the last pair)
    first = sq.sequence(d[: sq.MIN_PAIRS], 1.0)
    assert first.decision == ENABLE and first.settled_at == sq.MIN_PAIRS
    for n in range(sq.MIN_PAIRS, 61):
        s = sq.sequence(d[:n], 1.0)
        assert (s.decision, s.settled_at) == (ENABLE, sq.MIN_PAIRS)
        assert s.lo_ns <= s.mean_ns <= s.hi_ns


def test_settle_estimate_is_the_first_settling_pair_count():
    # GIVEN a mean and spread WHEN asked how many pairs settle THEN the boundary settles there and not one before
    rho2 = sq.rho2_for(50)
    n = sq.pairs_to_settle(30.0, 100.0, 5.0, rho2)
    assert n is not None and n > sq.MIN_PAIRS
    assert float(sq.half_width(100.0, n, rho2)) < 30.0 <= float(sq.half_width(100.0, n - 1, rho2))
    # AND a saving of zero with a margin settles as "no effect" once the boundary fits inside the margin
    m = sq.pairs_to_settle(0.0, 100.0, 20.0, rho2)
    assert m is not None and float(sq.half_width(100.0, m, rho2)) < 20.0


@pytest.mark.slow  # ~8 s of a core: 400 series looked at 115 times each
def test_peeking_keeps_the_error_with_the_sequence_not_with_the_fixed_ci():
    # GIVEN 400 GENERATED series of 120 pairs with no effect (t-distributed, 5 degrees of freedom: heavier tails
    # than normal), looked at after every pair from MIN_PAIRS on
    rng = np.random.default_rng(11)
    runs, n = 400, 120
    seq_false = fixed_false = 0
    for _ in range(runs):
        d = rng.standard_t(5, n) * 200.0
        s = sq.sequence(d, 1e-9)  # a margin of ~0: only enable / keep off can be taken
        seq_false += s.settled_at is not None
        k = np.arange(1, n + 1)
        mean = np.cumsum(d) / k
        sd = np.sqrt(np.maximum(np.cumsum(d * d) - k * mean ** 2, 0) / np.maximum(k - 1, 1))
        looks = range(sq.MIN_PAIRS - 1, n)
        fixed_false += any(abs(mean[i]) > stats.t_ppf(0.975, i) * sd[i] / math.sqrt(i + 1) for i in looks)
    # THEN the sequence's rate of a false enable / keep off stays at 5 % (binomial slack), the fixed CI's does not
    assert seq_false / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)
    assert fixed_false / runs > 0.15

"""Edges of abtest/judging/judge.py and expo_prof/stats.py that mutation testing showed no other test pinned down.

GIVEN runs built in memory (as ``compare`` gets them from the loaders) WHEN
compared, THEN a flagged run on side A is left out only when asked, and each
sensitivity line states a change, a CI and a p only where one exists. GIVEN
float32 inputs WHEN the robust scores are computed THEN they are the float64
ones (the inputs' float width never changes a flag).
"""

from __future__ import annotations

import numpy as np
import pytest

from expo_prof.abtest.judging.judge import compare
from expo_prof.abtest.inputs.sides import Loaded, Run, Side
from expo_prof.stats import MAX_RUNS, _smallest_n, mad, modified_z, paired_t, welch_t


def _side(name: str, metric: str, vals: list[float | None]) -> Side:
    runs = [Run(label=f"{name}{i + 1}", source=f"mem:{name}{i + 1}", values={} if v is None else {metric: v})
            for i, v in enumerate(vals)]
    return Side(name=name, runs=runs, sources=[f"mem:{name}"])


def _paired(metric: str, a: list[float | None], b: list[float | None]) -> Loaded:
    return Loaded(a=_side("off", metric, a), b=_side("on", metric, b),
                  pairs=[(i, i) for i in range(len(a))], design_reason="built in memory")


def test_an_outlier_on_side_a_is_left_out_only_when_asked():
    # GIVEN 6 pairs whose A side (not B) has an outlier run (a4, 8 % low), and a warm-up pair
    a = [898.0, 1021.0, 1025.0, 940.0, 1024.0, 1019.0]
    b = [880.0, 1000.0, 1006.0, 995.0, 1003.0, 998.0]
    loaded = _paired("output_throughput", a, b)
    # WHEN only the warm-up runs are left out
    res = compare(loaded, drop_warmup=True)
    # THEN the A outlier is flagged but kept: 5 pairs remain, only the warm-up runs are excluded
    assert ("outlier", "off", "off4") in [(f.kind, f.side, f.run) for f in res.flags]
    assert res.design.excluded == ["off1", "on1"] and res.design.pairs == 5
    # AND asking for outliers too leaves it out (and its pair)
    res2 = compare(loaded, drop_warmup=True, drop_outliers=True)
    assert res2.design.excluded == ["off1", "off4", "on1"] and res2.design.pairs == 4


def test_sensitivity_without_a_baseline_mean_says_n_a_and_no_ci():
    # GIVEN a lower-is-better mechanism metric whose baseline is 0 µs after a warm-up step on each side
    loaded = _paired("exposed_exp_us_per_step", [50.0, 0.0, 0.0, 0.0], [60.0, 10.0, 11.0, 12.0])
    # WHEN compared on it
    res = compare(loaded, primary="exposed_exp_us_per_step")
    # THEN leaving the warm-up out gives no relative change and no relative CI, and the line says so
    (s,) = res.sensitivity
    assert s.what == "without the warm-up runs" and s.runs == ["off1", "on1"]
    assert s.change_pct is None and s.ci_pct is None and s.p is not None
    assert s.statement.startswith("without the warm-up runs (off1, on1): exposed exp / step n/a, p=")
    assert "95% CI" not in s.statement


def test_sensitivity_with_one_pair_left_has_no_test():
    # GIVEN 4 interleaved pairs with a warm-up on each side, where one run of each side failed (no metric),
    # in different pairs
    loaded = _paired("output_throughput", [800.0, 1000.0, 1002.0, None], [820.0, 1010.0, None, 1011.0])
    # WHEN compared, and the warm-up pair is left out in the sensitivity view: one complete pair remains
    res = compare(loaded)
    (s,) = res.sensitivity
    # THEN the line has the change but neither a CI nor a p: no test is possible on one pair
    assert s.what == "without the warm-up runs" and s.p is None and s.ci_pct is None
    assert s.change_pct is not None
    assert ", p=" not in s.statement and "95% CI" not in s.statement
    assert s.statement.startswith(f"without the warm-up runs (off1, on1): output tok/s {s.change_pct:+.2f}% → ")


def test_robust_scores_are_computed_in_float64_whatever_the_input_width():
    # GIVEN run values given as float32 (wide range: float32 arithmetic would round the deviations)
    x32 = np.array([1.0, 2.5, 3.0e7 + 2.0, 3.0e7 + 6.0, 3.0e7 + 14.0, 7.0e7], dtype=np.float32)
    x64 = x32.astype(np.float64)
    ref32 = np.array([0.5, 1.0, 3.0e7 + 2.0, 7.0e7], dtype=np.float32)  # median 15000001.5: not a float32
    # WHEN MAD and modified z-scores are computed, alone and against a float32 reference
    # THEN each equals the float64 computation on the same values, and is float64
    assert mad(x32) == mad(x64)
    z = modified_z(x32)
    assert z.dtype == np.float64 and np.array_equal(z, modified_z(x64))
    zr = modified_z(x64, ref32)
    assert zr.dtype == np.float64 and np.array_equal(zr, modified_z(x64, ref32.astype(np.float64)))


def test_welch_t_is_computed_in_float64_whatever_the_input_width():
    # GIVEN two sides given as float32 arrays of large, close values (float32 variance would round)
    a32 = np.array([3.0e7 + 2.0, 3.0e7 + 6.0, 3.0e7 + 14.0, 3.0e7 + 8.0], dtype=np.float32)
    b32 = np.array([3.0e7 + 20.0, 3.0e7 + 26.0, 3.0e7 + 18.0], dtype=np.float32)
    # WHEN Welch's t-test runs on them THEN it equals the run on the same values in float64
    got, ref = welch_t(a32, b32), welch_t(a32.astype(np.float64), b32.astype(np.float64))
    assert (got.diff, got.se, got.df, got.p) == (ref.diff, ref.se, ref.df, ref.p)
    got_b = welch_t(a32.astype(np.float64), b32)
    assert (got_b.diff, got_b.se, got_b.df, got_b.p) == (ref.diff, ref.se, ref.df, ref.p)


def test_runs_needed_is_the_first_n_whose_power_reaches_the_target_exactly():
    # GIVEN a power that jumps to exactly the target at n = 5 (reaching it counts: power >= target)
    def step(at: int, low: float = 0.0):
        return lambda n: 0.8 if n >= at else low

    # WHEN the smallest n is searched THEN it is that n, wherever it lies in the doubling brackets
    for at in (2, 3, 5, 8, 9, 33, MAX_RUNS):
        assert _smallest_n(step(at), 0.8) == at
    # AND a power that never reaches the target within MAX_RUNS gives None
    assert _smallest_n(lambda n: 0.7999, 0.8) is None


def test_paired_t_is_computed_in_float64_and_needs_two_pairs():
    # GIVEN pairs given as float32 arrays of large, close values
    a32 = np.array([3.0e7 + 2.0, 3.0e7 + 6.0, 3.0e7 + 14.0], dtype=np.float32)
    b32 = np.array([3.0e7 + 20.0, 3.0e7 + 26.0, 3.0e7 + 18.0], dtype=np.float32)
    ref = paired_t(a32.astype(np.float64), b32.astype(np.float64))
    # WHEN the paired t-test runs on them THEN it equals the float64 run
    for a, b in ((a32, b32), (a32, b32.astype(np.float64)), (a32.astype(np.float64), b32)):
        got = paired_t(a, b)
        assert (got.diff, got.se, got.df, got.p) == (ref.diff, ref.se, ref.df, ref.p)
    # AND two pairs are enough for it (one is not)
    assert paired_t([1.0, 2.0], [2.0, 3.5]).df == 1.0
    with pytest.raises(ValueError):
        paired_t([1.0], [2.0])

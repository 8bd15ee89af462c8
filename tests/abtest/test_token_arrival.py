"""The burst metrics of the token-arrival check (abtest/judging/flags.py) and the gaps they read (abtest/inputs/gaps.py).

GIVEN hand-built inter-token gap arrays whose mean, near-zero share, percentiles and maximum follow from their
construction (each test says how) WHEN their shape is measured and two sides are set against each other THEN the
figures are those, and each rule of the "tokens arrive in bursts" flag fires exactly when its threshold is passed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from expo_prof.abtest.inputs import gaps
from expo_prof.abtest.inputs.sides import Loaded, Run, Side
from expo_prof.abtest.judging import flags
from expo_prof.abtest.judging.flags import arrival_stats, burst_reasons, token_arrival

MS = 1e-3  # gaps are given in seconds, as the loads keep them


def test_smooth_gaps():
    """GIVEN 200 gaps of exactly 5 ms THEN mean, p50, p99 and max are 5 ms, none is near zero, p99/p50 is 1."""
    s = arrival_stats("off", np.full(200, 5 * MS))
    assert (s.gaps, s.runs, s.runs_total) == (200, 1, 1)
    assert s.mean_ms == pytest.approx(5.0) and s.near_zero_ms == pytest.approx(0.25)
    assert (s.p50_ms, s.p99_ms, s.max_ms) == pytest.approx((5.0, 5.0, 5.0))
    assert s.near_zero_share == 0.0 and s.tail_ratio == pytest.approx(1.0)


def test_bursty_gaps():
    """GIVEN 80 gaps of 10 µs and 20 of 50 ms (tokens in bursts of five: four arrive with the one before, then a
    long wait) THEN the mean is (80·0.01 + 20·50)/100 = 10.008 ms, near zero is under 5 % of it (0.5004 ms), so
    80 % of the gaps are near zero; sorted, the 50th and 51st gaps are 10 µs (p50) and the 99th and 100th 50 ms
    (p99 = max); p99/p50 = 5000."""
    s = arrival_stats("on", np.array([0.01 * MS] * 80 + [50 * MS] * 20))
    assert s.mean_ms == pytest.approx(10.008) and s.near_zero_ms == pytest.approx(0.5004)
    assert s.near_zero_share == pytest.approx(0.8)
    assert s.p50_ms == pytest.approx(0.01) and s.p99_ms == pytest.approx(50.0) and s.max_ms == pytest.approx(50.0)
    assert s.tail_ratio == pytest.approx(5000.0)


def test_zero_median_has_no_tail_ratio_and_the_threshold_is_relative():
    """GIVEN 60 gaps of 0 and 40 of 10 ms THEN p50 is 0 (the 50th and 51st sorted gaps), so p99/p50 is null (no
    ratio to a zero), and 60 % are near zero (under 5 % of the 4 ms mean). AND the same gaps a thousand times
    longer have the same near-zero share: the threshold scales with the side's mean gap."""
    g = np.array([0.0] * 60 + [10 * MS] * 40)
    s = arrival_stats("on", g)
    assert s.p50_ms == 0.0 and s.tail_ratio is None and s.near_zero_share == pytest.approx(0.6)
    assert arrival_stats("on", g * 1000).near_zero_share == pytest.approx(0.6)


def _side(name: str, values_ms: list[float]):
    return arrival_stats(name, np.array(values_ms) * MS)


def test_near_zero_rule_fires_above_its_threshold_only():
    """GIVEN side y: 100 gaps of 10 ms; x: 30 gaps of 10 µs and 70 of 10 ms (30 points more near zero than y, past
    the 25-point threshold), x': 20 of 10 µs (20 points: below it) THEN the first rule fires for x, not for x'.
    Neither has its p50 fall (the 50th/51st sorted gaps of both are 10 ms), so the second rule does not fire."""
    y = _side("off", [10.0] * 100)
    x = _side("on", [0.01] * 30 + [10.0] * 70)
    x_less = _side("on", [0.01] * 20 + [10.0] * 80)
    assert flags.BURST_SHARE_RISE == 0.25
    reasons = burst_reasons(x, y)
    assert len(reasons) == 1 and reasons[0].startswith("30.0 % of the on side's gaps are near zero")
    assert "against 0.0 % of the off side's" in reasons[0]
    assert burst_reasons(x_less, y) == []
    # AND the rule is about one side against the other: y against x finds nothing
    assert burst_reasons(y, x) == []


def test_median_down_tail_up_rule():
    """GIVEN y: 100 gaps of 10 ms; x: 97 of 5 ms and 3 of 20 ms (no gap near zero: 5 % of x's 5.45 ms mean is
    0.27 ms) THEN x's p50 5 ms is more than 25 % below 10 ms and its p99 20 ms (the 99th/100th sorted gaps) more
    than 25 % above, so the second rule fires alone. A uniform speed-up (x'': every gap 5 ms, p99 down too) and a
    p50 fall of only 20 % (8 ms) fire nothing."""
    y = _side("off", [10.0] * 100)
    x = _side("on", [5.0] * 97 + [20.0] * 3)
    assert x.near_zero_share == 0.0
    reasons = burst_reasons(x, y)
    assert len(reasons) == 1 and reasons[0] == ("its ITL p50 is 5.00 ms against 10.00 ms while its p99 is 20.00 ms against "
                                        "10.00 ms (its longest gap 20.00 ms)")
    assert burst_reasons(_side("on", [5.0] * 100), y) == []
    assert burst_reasons(_side("on", [8.0] * 97 + [20.0] * 3), y) == []


def _loaded(a_runs: list[np.ndarray | None], b_runs: list[np.ndarray | None]) -> Loaded:
    def side(name, arrays):
        return Side(name=name, runs=[Run(label=f"{name}{i}", source=f"mem:{name}{i}", values={"output_throughput": 1.0},
                                         itl_s=g) for i, g in enumerate(arrays)])

    return Loaded(a=side("off", a_runs), b=side("on", b_runs), pairs=None, design_reason="built in memory")


def test_sides_pool_their_runs_and_either_side_can_be_bursty():
    """GIVEN the off side bursty over two runs (each 50 gaps: 45 of 10 µs, 5 of 100 ms; 90 % near zero) and the on
    side smooth (one run of 100 gaps of 10 ms) and a third off run that kept no gaps THEN the off side pools 100 gaps
    of 2 of its 3 runs, and the flag names the off side, with both rules."""
    bursty = np.array([0.01 * MS] * 45 + [100 * MS] * 5)
    arrival = token_arrival(_loaded([bursty, bursty, None], [np.full(100, 10 * MS)]))
    assert arrival.measured and arrival.bursts is True and arrival.bursty_side == "off"
    assert arrival.a is not None and (arrival.a.gaps, arrival.a.runs, arrival.a.runs_total) == (100, 2, 3)
    assert arrival.a.near_zero_share == pytest.approx(0.9) and len(arrival.reasons) == 2
    assert arrival.metrics == ["median_itl_ms", "mean_itl_ms"]
    assert "not a speed-up" in arrival.statement


def test_too_few_or_no_gaps_is_not_measurable():
    """GIVEN 99 gaps on one side (one fewer than MIN_GAPS = 100), or no gaps at all on one side THEN nothing is
    judged: measured false, no flag (null), no metrics named."""
    assert flags.MIN_GAPS == 100
    smooth = np.full(100, 10 * MS)
    for a, b in (([np.full(99, 10 * MS)], [smooth]), ([None], [smooth]), ([smooth], [np.array([])])):
        arrival = token_arrival(_loaded(a, b))
        assert not arrival.measured and arrival.bursts is None and arrival.bursty_side is None
        assert arrival.metrics == [] and arrival.statement.startswith("not measurable")


def test_like_sides_are_not_flagged():
    """GIVEN both sides smooth, the on side 10 % faster in every gap THEN measured, no flag: a real speed-up."""
    arrival = token_arrival(_loaded([np.full(200, 10 * MS)], [np.full(200, 9 * MS)]))
    assert arrival.measured and arrival.bursts is False and arrival.reasons == [] and arrival.metrics == []
    assert arrival.statement.startswith("tokens arrive alike")


def test_gaps_of_a_workload_json_are_the_measured_requests_only():
    """GIVEN a built-in load's workload.json: a warm-up, two measured requests, a failed one, and junk values (text,
    null, NaN, a negative time, a bool) THEN the gaps are the measured ok requests' valid ones, in order."""
    wl = {"requests": [
        {"ok": True, "warmup": True, "itl_s": [0.5, 0.5]},
        {"ok": True, "warmup": False, "itl_s": [0.001, 0.002, "x", None]},
        {"ok": False, "warmup": False, "itl_s": [0.9]},
        {"ok": True, "warmup": False, "itl_s": [0.003, math.nan, -0.001, True, 0.0]},
        "not a request",
        {"ok": True, "itl_s": "not a list"},
    ]}
    assert gaps.from_workload(wl).tolist() == [0.001, 0.002, 0.003, 0.0]


def test_gaps_absent_are_none():
    """GIVEN inputs that keep no gaps — an older workload.json (no requests), requests without itl_s, a vllm bench
    result saved without --save-detailed (no itls), or itls of failed requests only (empty lists) THEN None."""
    assert gaps.from_workload({"spec": {}, "metrics": {}}) is None
    assert gaps.from_workload({"requests": [{"ok": True, "warmup": False}]}) is None
    assert gaps.from_workload([]) is None
    assert gaps.from_bench({"output_throughput": 1.0}) is None
    assert gaps.from_bench({"itls": [[], []]}) is None


def test_gaps_of_a_bench_result_are_pooled():
    """GIVEN a vllm bench serve --save-detailed result's itls (one list per request, junk among them) THEN the
    valid gaps of every request, pooled in order."""
    assert gaps.from_bench({"itls": [[0.01, 0.02], [], "x", [0.03, None]]}).tolist() == [0.01, 0.02, 0.03]

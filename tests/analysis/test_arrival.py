"""A switchback run's inter-token gaps by arm (expo_prof/analysis/saving/arrival.py), on hand-built steps and arrivals.

GIVEN steps with known wall-clock windows and phases, and token arrivals placed at known times
WHEN each gap is given to the step running when its token arrived
THEN a gap at a block boundary goes to the step that starts there; gaps before the first step, after the last
and in the engine's idle gap are left out and counted (``outside``), those in a block's first step too
(``washout``); each arm's shape is its own gaps'; and the burst rule — the A/B flag's, its thresholds from one
place — fires on the arm whose gaps turned bursty, at the documented thresholds and not below them.
"""

from __future__ import annotations

import numpy as np
import pytest

from expo_prof.abtest import model as ab_model
from expo_prof.abtest.judging import flags
from expo_prof.analysis.saving import arrival
from expo_prof.analysis.saving.arrival import BURSTS, NOT_A_SPEEDUP, arrivals, attribute, of_log, step_windows, switchback_arrival
from expo_prof.pipeline.token_gaps import measured_arrivals

MS = 1_000_000


def test_the_rule_is_one_rule():
    """The A/B flag reads the thresholds, the shape and the rules of the analysis module: one definition."""
    assert (flags.NEAR_ZERO_SHARE_OF_MEAN, flags.BURST_SHARE_RISE, flags.SHAPE_CHANGE, flags.MIN_GAPS) == (
        arrival.NEAR_ZERO_SHARE_OF_MEAN, arrival.BURST_SHARE_RISE, arrival.SHAPE_CHANGE, arrival.MIN_GAPS) == (
        0.05, 0.25, 0.25, 100)
    assert flags.burst_reasons is arrival.burst_reasons
    assert ab_model.BURSTS == BURSTS  # the flag's words, alike in compare and in the switchback block


def test_arrivals_are_the_start_plus_the_first_token_plus_the_gaps():
    at, gaps = arrivals([1_000, 5_000_000_000], [0.001, 0.5], [[0.002, 0.003], [0.25]])
    assert at.tolist() == [1_000 + 3 * MS, 1_000 + 6 * MS, 5_000_000_000 + 750 * MS]
    assert gaps.tolist() == [0.002, 0.003, 0.25]


def test_a_token_goes_to_the_step_running_when_it_arrived():
    start = np.array([100, 110, 120, 130]) * MS
    end = np.array([110, 120, 130, 135]) * MS
    at = np.array([99.999, 100, 109.999, 110, 119, 134.999, 135, 200]) * MS
    # THEN [start, end): the boundary 110 is the second step's; before 100 and from 135 on, none
    assert attribute(at.astype(np.int64), start, end).tolist() == [-1, 0, 0, 1, 1, 3, -1, -1]
    # AND steps in any order are found alike
    order = np.array([2, 0, 3, 1])
    assert attribute(at.astype(np.int64), start[order], end[order]).tolist() == [-1, 1, 1, 3, 3, 2, -1, -1]
    assert attribute(np.array([5]), np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == [-1]


def _log(phases: list[str], cadence_ms: float = 10.0, host_end_ms: float = 8.0, block: int = 4,
         stall_at: int | None = None, stall_ms: float = 500.0) -> dict:
    """Step columns of a switchback log: one block of ``block`` steps per phase, one step every ``cadence_ms`` from
    t0 = 0 (monotonic), ``stall_at``: the engine waits ``stall_ms`` after that step (an idle gap)."""
    n = block * len(phases)
    t0 = np.arange(n) * cadence_ms * MS
    if stall_at is not None:
        t0[stall_at + 1:] += int(stall_ms * MS)
    return {"step": np.arange(n), "t0_ns": t0.astype(np.int64), "host_end_ns": np.full(n, int(host_end_ms * MS)),
            "block": np.repeat(np.arange(len(phases)), block),
            "phase": np.array([p for p in phases for _ in range(block)], dtype=object)}


WALL = 1_700_000_000_000_000_000  # wall minus monotonic


def test_gaps_by_arm_with_the_gaps_left_out_counted():
    # GIVEN blocks off, on, on, off of 4 steps, one every 10 ms (off 0–40 ms, on 40–120 ms, off 120–160 ms), the
    # engine idle after step 13 (its own work ends at 138 ms, the next step starts 500 ms later)
    cols = _log(["off", "on", "on", "off"], stall_at=13)
    start, end, first = step_windows(cols, WALL)
    assert (end - start)[:13].tolist() == [10 * MS] * 13 and end[13] - start[13] == 8 * MS  # idle: its own work
    assert end[-1] - start[-1] == 8 * MS and first.tolist() == [i % 4 == 0 for i in range(16)]
    cases = [  # (arrival ms after the first step's t0, gap s, where it goes)
        (-1.0, 0.9, "outside"),     # before the first step
        (5.0, 0.5, "washout"),      # the first step of the first off block
        (12.0, 0.010, "off"),
        (39.9, 0.011, "off"),
        (40.0, 0.9, "washout"),     # exactly at the on block's first step: that step's, washed out
        (51.0, 0.020, "on"),
        (80.0, 0.9, "washout"),     # the second on block's first step (block 2)
        (95.0, 0.021, "on"),
        (119.0, 0.022, "on"),
        (120.5, 0.9, "washout"),    # a block boundary: the last off block's first step
        (137.0, 0.012, "off"),      # step 13's own work (130–138 ms)
        (139.0, 0.9, "outside"),    # the idle gap after it
        (645.0, 0.013, "off"),      # step 14 (640–650 ms)
        (659.0, 0.9, "outside"),    # after the last step's own work (650–658 ms)
    ]
    at = np.array([WALL + int(ms * MS) for ms, _, _ in cases], dtype=np.int64)
    gaps = np.array([g for _, g, _ in cases])
    res = of_log(cols, WALL, at, gaps)
    # THEN each arm holds exactly its gaps, and the others are counted where they went
    arms = {a.name: a for a in res.arms}
    assert [a.name for a in res.arms] == ["off", "on"]
    assert arms["off"].gaps == 4 and arms["off"].max_ms == pytest.approx(13.0)
    assert arms["off"].mean_ms == pytest.approx(np.mean([10, 11, 12, 13]))
    assert arms["on"].gaps == 3 and arms["on"].p50_ms == pytest.approx(21.0) and arms["on"].max_ms == pytest.approx(22)
    assert (res.outside, res.washout) == (3, 4)
    # AND with fewer than 100 gaps per arm nothing is judged
    assert res.measured is False and res.bursts is None and res.flags == []
    assert res.statement == "not measurable: fewer than 100 inter-token gaps in the off and on blocks"


def test_steps_outside_switchback_hold_no_arm():
    cols = _log(["off", "on"])
    cols["block"][:4] = -1  # not a switchback step (before the first block)
    res = of_log(cols, 0, np.array([15 * MS, 55 * MS]), np.array([0.01, 0.02]))
    assert [a.name for a in res.arms] == ["on"] and (res.outside, res.washout) == (1, 0)


def _judge(off_ms: np.ndarray, on_ms: np.ndarray, arms=("off", "on")):
    """Off gaps in off steps, on gaps in on steps (one gap per step, mid-step, never a block's first)."""
    n_off, n_on = len(off_ms), len(on_ms)
    phase = np.array(["off"] * n_off + ["on"] * n_on, dtype=object)
    start = np.arange(n_off + n_on, dtype=np.int64) * 10 * MS
    first = np.zeros(n_off + n_on, dtype=bool)
    gaps = np.concatenate([off_ms, on_ms]) / 1e3
    return switchback_arrival(start + 5 * MS, gaps, start, start + 10 * MS, phase, first, arms)


def test_a_near_zero_share_25_points_higher_is_not_yet_bursts_and_just_above_it_is():
    off = np.full(200, 10.0)
    at_limit = np.r_[np.zeros(50), np.full(150, 10.0)]  # 25.0 % near zero against 0 %: not more than 25 points
    res = _judge(off, at_limit)
    assert res.measured is True and res.bursts is False and res.flags == []
    assert res.statement.startswith("tokens arrive alike: near-zero gaps 0.0 % (off) vs 25.0 % (on)")
    above = np.r_[np.zeros(51), np.full(149, 10.0)]  # 25.5 %
    res = _judge(off, above)
    assert res.bursts is True and [(f.arm, f.against) for f in res.flags] == [("on", "off")]
    (reason,) = res.flags[0].reasons
    assert reason.startswith("25.5 % of the on arm's gaps are near zero (under 5 % of its mean gap")
    assert res.statement.startswith(f"{BURSTS} in the on blocks: 25.5 % of the on arm's gaps")
    assert f" — {NOT_A_SPEEDUP}: " in res.statement
    # AND the A/B flag, given the same gaps as two sides, says the same rule fired
    a, b = flags.arrival_stats("off", off / 1e3), flags.arrival_stats("on", above / 1e3)
    assert flags.burst_reasons(b, a) == [reason.replace(" arm's", " side's")]


def test_the_median_falling_while_the_tail_rises_is_bursts_on_either_arm():
    rng = np.random.default_rng(3)
    steady = rng.uniform(9.0, 11.0, 300)
    bursty = np.r_[rng.uniform(5.0, 7.0, 280), rng.uniform(20.0, 30.0, 20)]  # p50 ~6 ms, p99 ~29 ms, few near zero
    res = _judge(bursty, steady)  # the baseline (off) is the bursty one: looked at second, found
    assert res.bursts is True and [(f.arm, f.against) for f in res.flags] == [("off", "on")]
    (reason,) = res.flags[0].reasons
    assert reason.startswith("its ITL p50 is ") and "while its p99 is" in reason
    assert res.statement.startswith(f"{BURSTS} in the off blocks: its ITL p50")
    # AND a p50 only 20 % lower with the same tail is not
    res = _judge(steady * 0.8, steady)
    assert res.bursts is False


def test_three_arms_are_judged_by_each_comparison_of_the_saving():
    steady = np.full(150, 10.0)
    bursty = np.r_[np.zeros(60), np.full(90, 10.0)]  # 40 % near zero
    n = 150
    phase = np.array(["off"] * n + ["on"] * n + ["native"] * n, dtype=object)
    start = np.arange(3 * n, dtype=np.int64) * 10 * MS
    gaps = np.concatenate([steady, bursty, steady]) / 1e3
    res = switchback_arrival(start + MS, gaps, start, start + 10 * MS, phase, np.zeros(3 * n, dtype=bool),
                             ("off", "on", "native"))
    assert [a.name for a in res.arms] == ["off", "on", "native"]
    # THEN on is bursty against off and against native; off vs native alike
    assert [(f.arm, f.against) for f in res.flags] == [("on", "off"), ("on", "native")]


def test_a_workloads_tokens_are_placed_by_their_own_start_or_by_the_older_window():
    req = {"ok": True, "warmup": False, "start_s": 0.5, "ttft_s": 0.1, "itl_s": [0.01, 0.02]}
    own = {**req, "start_wall_ns": 7_000_000_000}
    wl = {"window_ns": [1_000_000_000, 9_000_000_000], "requests": [
        {**req, "warmup": True, "start_wall_ns": 1}, {**req, "ok": False}, own, req,
        {**req, "itl_s": [0.01, -1.0]}, {**req, "ttft_s": "x"}]}
    at, gaps = measured_arrivals(wl)
    # THEN the warm-up, the failed request and those with an unusable figure are left out; the request with its
    # own start is placed by it, the older one by window_ns[0] + start_s
    assert at.tolist() == [7_110_000_000, 7_130_000_000, 1_610_000_000, 1_630_000_000]
    assert gaps.tolist() == [0.01, 0.02, 0.01, 0.02]
    # AND without either anchor, or without requests (a user's load command), nothing is placed
    assert measured_arrivals({"window_ns": None, "requests": [req]}) is None
    assert measured_arrivals({"source": "load-cmd", "metrics": {}}) is None
    assert measured_arrivals([1, 2]) is None

"""Why: exponential time hidden per step vs forward-pass slowdown under overlap, from each run's analysis.json.

GIVEN sessions whose runs carry ``analysis.json`` (encoded from the real
analysis result model) with known per-step means WHEN compared THEN the
mechanism numbers are those means' differences and the statement names the
winning side of the trade-off.
"""

from __future__ import annotations

import json

import pytest
from ab_helpers import analysis_json, session_dir  # type: ignore[import-not-found]


def _session(tmp_path, off_fwd: list[float], on_fwd: list[float], *, off_timed: bool = True, tpot=(40.0, 41.0),
             sources: tuple[str | None, str | None] = (None, None)):
    runs = []
    for i, (f_off, f_on) in enumerate(zip(off_fwd, on_fwd, strict=True)):
        off_an = analysis_json(exposed_us=300.0 + i, hidden_us=0.0, forward_us=f_off,
                               forward_source=sources[0]) if off_timed else None
        # ±0.5 µs on the middle pairs: the pair differences vary (a zero-variance metric is not testable with 3
        # pairs), their mean stays 280 µs
        on_an = analysis_json(exposed_us=20.0 + i + (0.0, 0.5, -0.5)[i % 3], hidden_us=280.0, forward_us=f_on,
                              forward_source=sources[1])
        runs += [
            (False, {"output_throughput": 1000.0 - i, "mean_tpot_ms": tpot[0] + 0.01 * i}, off_an),
            (True, {"output_throughput": 990.0 - i, "mean_tpot_ms": tpot[1] + 0.01 * i}, on_an),
        ]
    return session_dir(tmp_path / "s", runs)


def test_contention_outweighing_the_hidden_time_is_named(tmp_path, cli):
    # GIVEN an MoE-like case: the overlay hides ~280 µs/step but the forward pass grows ~800 µs/step
    s = _session(tmp_path, [10000.0, 10010.0, 9995.0], [10800.0, 10812.0, 10790.0])
    out = json.loads(cli("compare", str(s), "--json").stdout)
    m = out["mechanism"]
    # THEN removed = critical path off − on (measured: exposed, no wait here), slowdown = forward on − off,
    # net = removed − slowdown
    assert m["available"] and m["removed_basis"].startswith("measured")
    assert m["exp_removed_us"] == pytest.approx(280.0)
    assert m["forward_slowdown_us"] == pytest.approx((10800 + 10812 + 10790 - 10000 - 10010 - 9995) / 3)
    assert m["forward_slowdown_pct"] == pytest.approx(100 * m["forward_slowdown_us"] / ((10000 + 10010 + 9995) / 3))
    assert m["net_us"] == pytest.approx(m["exp_removed_us"] - m["forward_slowdown_us"])
    assert m["forward_slowdown_significant"] is True
    assert "contention" in m["statement"] and "regression" in m["statement"]
    assert m["tpot_change_us"] == pytest.approx(1000.0)
    # AND the per-step metrics are compared like any other (lower exposed time is better)
    by = {x["name"]: x for x in out["metrics"]}
    assert by["exposed_exp_us_per_step"]["outcome"] == "better"
    assert by["forward_us_per_step"]["outcome"] == "worse"
    # AND the table prints the why line
    text = cli("compare", str(s)).stdout
    assert "why:" in text and "contention" in text


def test_hidden_time_outweighing_contention(tmp_path, cli):
    # GIVEN a dense-model-like case: forward grows only ~30 µs/step
    s = _session(tmp_path, [10000.0, 10010.0, 9995.0], [10030.0, 10041.0, 10024.0], tpot=(40.0, 39.0))
    m = json.loads(cli("compare", str(s), "--json").stdout)["mechanism"]
    # THEN the net is positive and said to favour the overlay
    assert m["net_us"] == pytest.approx(280.0 - 30.0, abs=0.5)
    assert "outweighs the contention" in m["statement"]


def test_off_runs_without_timing_fall_back_to_an_estimate(tmp_path, cli):
    # GIVEN off runs without analysis.json (CPU vLLM fuses the draw; no profiler)
    s = _session(tmp_path, [0, 0, 0], [10800.0, 10812.0, 10790.0], off_timed=False)
    m = json.loads(cli("compare", str(s), "--json").stdout)["mechanism"]
    # THEN the removed time is the on runs' hidden time, labelled as an estimate, and the slowdown is not invented
    assert m["removed_basis"].startswith("estimated") and m["exp_removed_us"] == pytest.approx(280.0)
    assert m["forward_slowdown_us"] is None and m["net_us"] is None
    assert any("forward-pass slowdown not measured" in n for n in m["notes"])


def test_no_traces_no_mechanism(tmp_path, cli):
    # GIVEN runs without any analysis
    runs = [(i % 2 == 1, {"output_throughput": 100.0 + i}, None) for i in range(4)]
    s = session_dir(tmp_path / "s", runs)
    m = json.loads(cli("compare", str(s), "--json").stdout)["mechanism"]
    # THEN the mechanism says it is unknown and why
    assert m["available"] is False and "mechanism unknown" in m["statement"]


def test_the_sampler_wait_is_taken_off_what_the_overlay_removes(tmp_path, cli):
    # GIVEN on runs that hide the whole draw (exposed 20 µs) but whose sampler waits 250 µs per step for q
    runs = []
    for i in range(3):
        runs += [
            (False, {"output_throughput": 1000.0 - i}, analysis_json(exposed_us=300.0, hidden_us=0.0, forward_us=1e4)),
            (True, {"output_throughput": 999.0 - i},
             analysis_json(exposed_us=20.0, hidden_us=280.0, forward_us=1e4, wait_us=250.0)),
        ]
    s = session_dir(tmp_path / "s", runs)
    m = json.loads(cli("compare", str(s), "--json").stdout)["mechanism"]
    # THEN what leaves the critical path is 300 − (20 + 250) = 30 µs, not the 280 µs of exposed time
    assert m["exp_removed_us"] == pytest.approx(30.0)
    assert "critical-path" in m["removed_basis"]


def test_the_committed_sample_states_no_removal_from_unlike_critical_paths(cli):
    """GIVEN the committed real off/on session (tiny Llama, vLLM CPU): the off run's instances are vLLM's fused
    noise+argmax op (exposed ~57 µs per step), the on run's the overlay's draw alone, hidden, with the sampler
    waiting ~52 µs per step for q WHEN compared THEN no exponential time taken off the critical path is stated:
    off − on of those critical paths would subtract the draw's wait from a fused op's time (this test asserted that
    difference, a few µs, as the removed time until compare learnt that the two are different things:
    tests/abtest/test_unlike_sample.py); each side's critical path stays in its row."""
    from shared_paths import REPO  # type: ignore[import-not-found]

    session = REPO / "traces" / "samples" / "tiny-cpu-off-on"
    out = json.loads(cli("compare", str(session), "--json").stdout)
    by = {x["name"]: x for x in out["metrics"]}
    assert by["wait_us_per_step"]["b"]["mean"] > 40 and by["exposed_exp_us_per_step"]["b"]["mean"] == 0
    assert by["exposed_exp_us_per_step"]["a"]["mean"] > 50
    m = out["mechanism"]
    assert m["exp_removed_us"] is None and m["removed_basis"] is None
    assert "critical path is not measured" in m["cause_missing"] and "_C::fused_gumbel_argmax" in m["cause_missing"]
    crit = by["critical_us_per_step"]
    assert crit["outcome"] == "not compared" and crit["diff"] is None
    # the off run's critical path is its fused op's exposed time, the on run's its wait (the draw is hidden)
    assert crit["a"]["mean"] == pytest.approx(by["exposed_exp_us_per_step"]["a"]["mean"])
    assert crit["b"]["mean"] == pytest.approx(by["wait_us_per_step"]["b"]["mean"])


def test_forward_metric_and_why_line_name_compute_busy_time(tmp_path, cli):
    """GIVEN runs whose analysis measured forward as compute-busy time (traces without a forward span) WHEN compared
    THEN the metric is labelled "compute busy (no forward span) / step" in the JSON and the table, and the why line
    says that compute-busy time grew, not that the forward pass did."""
    s = _session(tmp_path, [10000.0, 10010.0, 9995.0], [10800.0, 10812.0, 10790.0],
                 sources=("compute-busy", "compute-busy"))
    out = json.loads(cli("compare", str(s), "--json").stdout)
    label = "compute busy (no forward span) / step"
    assert {x["name"]: x for x in out["metrics"]}["forward_us_per_step"]["label"] == label
    assert "compute busy (no forward span) takes" in out["mechanism"]["statement"]
    assert "forward pass takes" not in out["mechanism"]["statement"]
    text = " ".join(cli("compare", str(s)).stdout.split())
    assert "compute busy (no forward span) takes" in text
    assert "compute busy (no" in text and "forward span) / step" in text  # the metric column wraps the label


def test_forward_from_different_sources_is_said(tmp_path, cli):
    """GIVEN off runs whose forward is compute-busy time and on runs timed by the expo_prof::forward span WHEN
    compared THEN the metric says its sources are mixed and a note names both; neither side's source is shown as
    if it held for all runs; AND no cause is named from the two unlike measures: no slowdown, no net, no
    "contention", and the statement says what is missing (issue 33)."""
    s = _session(tmp_path, [10000.0, 10010.0, 9995.0], [10800.0, 10812.0, 10790.0],
                 sources=("compute-busy", "expo_prof::forward"))
    out = json.loads(cli("compare", str(s), "--json").stdout)
    assert {x["name"]: x for x in out["metrics"]}["forward_us_per_step"]["label"] == "forward (mixed sources) / step"
    m = out["mechanism"]
    assert "forward (mixed sources) takes" not in m["statement"] and "contention" not in m["statement"]
    assert m["forward_slowdown_us"] is None and m["net_us"] is None
    assert "no cause named" in m["statement"] and m["cause_missing"] in m["statement"]
    assert "compute busy (no forward span)" in m["cause_missing"] and "expo_prof::forward" in m["cause_missing"]
    assert any("compute busy (no forward span)" in n and "forward (expo_prof::forward span)" in n
               for n in out["mechanism"]["notes"])


def test_a_falling_critical_path_with_slower_steps_is_split_where_the_forward_is_alike(tmp_path, cli):
    """GIVEN sessions whose sides time the forward alike (the expo_prof::forward span both), the critical path
    falls ~280 µs/step and TPOT rises 1 ms WHEN compared THEN the mechanism says how both hold: the rest of the
    step grew by TPOT change + removed, of which the forward's slowdown is named and the remainder is outside it."""
    s = _session(tmp_path, [10000.0, 10010.0, 9995.0], [10800.0, 10812.0, 10790.0],
                 sources=("expo_prof::forward", "expo_prof::forward"))
    m = json.loads(cli("compare", str(s), "--json").stdout)["mechanism"]
    assert m["cause_missing"] is None and m["forward_slowdown_us"] is not None
    assert m["rest_change_us"] == pytest.approx(m["tpot_change_us"] + m["exp_removed_us"])
    from expo_prof.words import fmt_ns

    rest_outside = m["rest_change_us"] - m["forward_slowdown_us"]
    assert fmt_ns(m["forward_slowdown_us"] * 1e3, signed=True) + " of it" in m["reconcile"]
    assert fmt_ns(rest_outside * 1e3, signed=True) + " outside the forward" in m["reconcile"]

"""Which rows of a comparison are one measure on both sides (expo_prof/abtest/judging/likeness.py).

GIVEN sessions whose runs carry ``analysis.json`` (encoded from the real analysis result model) naming the rule
that found each rank's instances and the forward's source WHEN compared THEN a row whose sides time different
things (a fused sampler vs the draw; different forward spans; a side mixing them) shows each side's values and
the reason, and no change, CI, test or outcome; rows whose sides are alike (the draw found by different draw
rules, the client's figures) are compared as ever. The real case (the committed vLLM CPU runs) is
tests/abtest/test_unlike_sample.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ab_helpers import analysis_json, metric, ok_json, session_dir  # type: ignore[import-not-found]

from expo_prof.abtest.judging import likeness
from expo_prof.abtest.metrics import FORWARD, INSTANCES, METRICS

CHANGE_FIELDS = ("diff", "change_pct", "ci_diff", "ci_pct", "t_test", "permutation", "significant", "runs_needed")


def _session(tmp_path: Path, off_rules, on_rules, *, sources=(None, None), pairs: int = 3) -> Path:
    """``pairs`` off/on pairs; ``off_rules`` / ``on_rules``: each run's ranks' rules (a list per run, or one list
    for every run). Output tok/s falls 1 % with the overlay on, with spread (a significant, testable change)."""
    runs = []
    for i in range(pairs):
        off_r = off_rules[i] if off_rules and isinstance(off_rules[0], list) else off_rules
        on_r = on_rules[i] if on_rules and isinstance(on_rules[0], list) else on_rules
        off_an = analysis_json(exposed_us=60.0 + i, hidden_us=0.0, forward_us=3000.0 + 10 * i,
                               forward_source=sources[0], rules=off_r)
        on_an = analysis_json(exposed_us=1.0 + 0.1 * i, hidden_us=270.0 + i, forward_us=4600.0 - 5 * i, wait_us=50.0 + i,
                              forward_source=sources[1], rules=on_r)
        runs += [(False, {"output_throughput": 1000.0 + 3 * i, "mean_tpot_ms": 5.0 + 0.01 * i}, off_an),
                 (True, {"output_throughput": 990.0 + 2 * i + (0.0, 0.5, -0.5)[i % 3],
                         "mean_tpot_ms": 10.0 + 0.02 * i}, on_an)]
    return session_dir(tmp_path / "s", runs)


def _compared(r: dict) -> bool:
    """Judged as ever: no reason not to, and a change wherever both sides have the metric."""
    return r["not_compared"] is None and r["outcome"] != "not compared" and (r["diff"] is not None
                                                                           or r["outcome"] == "missing")


def test_every_metric_says_what_makes_it_unlike():
    # The draw's four figures by what the instances are, forward by its source; the client's figures and the
    # overlay's wait are one measure whatever the inputs.
    by = {n: m.like_by for n, m in METRICS.items()}
    assert {n for n, k in by.items() if k == INSTANCES} == {
        "critical_us_per_step", "exposed_exp_us_per_step", "hidden_exp_us_per_step", "exp_us_per_step"}
    assert {n for n, k in by.items() if k == FORWARD} == {"forward_us_per_step"}
    assert all(not k for n, k in by.items() if not METRICS[n].mechanism) and not by["wait_us_per_step"]


def test_the_rule_names_follow_the_analysis():
    """The draw rules spelled in abtest are those of expo_prof/analysis/targets.py that find the draw itself: every
    rule find_instances can name is a draw rule, a fused sampler or ``op``, and the two sets do not meet."""
    from expo_prof.analysis import targets

    source = Path(targets.__file__).read_text()
    named = set(re.findall(r'_from_rows\([^()]*?"([a-z0-9-]+)"\)', source))
    named |= set(re.findall(r'_empty\("([a-z0-9-]+)"\)', source)) | set(re.findall(r'rule="([a-z0-9-]+)"', source))
    named |= {rule for rule, _ in targets.FUSED_DEVICE_RULES}
    assert likeness.DRAW_RULES <= named
    assert named <= likeness.DRAW_RULES | set(targets.FUSED_SAMPLERS) | {"op"}
    assert not likeness.DRAW_RULES & set(targets.FUSED_SAMPLERS)
    assert set(likeness.FUSED_WORDS) == set(targets.FUSED_SAMPLERS)


@pytest.mark.parametrize(("info", "kind"), [
    ({"rules": ["host-span"]}, "draw"),
    ({"rules": ["device-kernel", "ascend-chain"]}, "draw"),
    ({"rules": ["cpu-fused-gumbel"]}, "cpu-fused-gumbel"),
    ({"rules": ["flashinfer-sampling", "mrv2-fused-gumbel"]}, "flashinfer-sampling+mrv2-fused-gumbel"),
    ({"rules": ["device-kernel", "mrv2-fused-gumbel"]}, "draw+mrv2-fused-gumbel"),
    ({"rules": ["op"], "op": "nccl"}, "op:nccl"),
    ({"rule": "overlay-span"}, "draw"),  # a Run without the "rules" key: its first rank's rule
    ({"rules": []}, None),
    ({}, None),
])
def test_instance_kind(info, kind):
    assert likeness.instance_kind(info) == kind


def test_a_fused_sampler_off_and_the_draw_on_are_not_compared(tmp_path, cli):
    # GIVEN three interleaved pairs: off runs found vLLM CPU's fused op, on runs the overlay's draw
    s = _session(tmp_path, ["cpu-fused-gumbel"], ["host-span"])
    out = ok_json(cli("compare", str(s), "--json", "--all-metrics"))
    for name in ("critical_us_per_step", "exposed_exp_us_per_step", "hidden_exp_us_per_step", "exp_us_per_step"):
        r = metric(out, name)
        # THEN no change, CI, test or significance — not even the paired test three pairs would allow
        assert r["outcome"] == "not compared" and {k: r[k] for k in CHANGE_FIELDS} == dict.fromkeys(CHANGE_FIELDS)
        assert r["not_compared"] == ("vLLM CPU's fused noise+argmax op _C::fused_gumbel_argmax (off) vs the "
                                     "exponential draw alone (on)")
        assert r["a"]["n"] == r["b"]["n"] == 3 and None not in (r["a"]["mean"], r["b"]["mean"])
    # AND the rows alike on both sides are judged as ever: the forward (no source said: one measure), output
    # tok/s (the verdict: significantly worse, so keep off)
    assert _compared(metric(out, "forward_us_per_step")) and metric(out, "forward_us_per_step")["significant"]
    assert _compared(metric(out, "output_throughput")) and out["verdict"]["decision"] == "keep off"
    # AND the mechanism takes nothing off the critical path from those rows (nor estimates it from the on runs'
    # hidden draw, which the off runs never paid), so it names no net
    m = out["mechanism"]
    assert m["exp_removed_us"] is None and m["net_us"] is None and m["forward_slowdown_us"] is not None
    assert m["cause_missing"].startswith("the exponential taken off the critical path is not measured")
    # AND the table says it, row by row
    text = cli("compare", str(s), "--all-metrics").stdout.split("change of the means", 1)[1]
    row = next(line for line in text.splitlines() if line.strip().startswith("exp draw / step"))
    assert "not compared: as for critical path / step" in row and "%" not in row


def test_the_draw_found_by_different_draw_rules_is_compared(tmp_path, cli):
    # GIVEN a GPU A/B: off runs' draw is the exponential kernel, on runs' the overlay's span around it
    s = _session(tmp_path, ["device-kernel"], ["overlay-span"])
    out = ok_json(cli("compare", str(s), "--json"))
    # THEN every row is compared (the draw is one thing, timed where each trace shows it)
    assert all(_compared(r) for r in out["metrics"]), [r["name"] for r in out["metrics"] if not _compared(r)]
    assert out["mechanism"]["removed_basis"].startswith("measured")


def test_a_side_mixing_instance_kinds_is_not_compared(tmp_path, cli):
    # GIVEN off runs of which one found a fused sampler and the others the draw (a mix of engines)
    s = _session(tmp_path, [["device-kernel"], ["mrv2-fused-gumbel"], ["device-kernel"]], ["overlay-span"])
    out = ok_json(cli("compare", str(s), "--json"))
    r = metric(out, "exp_us_per_step")
    assert r["outcome"] == "not compared" and r["change_pct"] is None
    assert r["not_compared"] == "the instances timed differ across the runs (or ranks) of the off side"
    # AND ranks of one run that differ count alike: a run is one measure only when all its ranks are
    s2 = _session(tmp_path / "ranks", ["device-kernel", "mrv2-fused-gumbel"], ["overlay-span"])
    r2 = metric(ok_json(cli("compare", str(s2), "--json")), "exposed_exp_us_per_step")
    assert r2["not_compared"] == ("the exponential draw alone and vLLM's fused noise+argmax kernel _gumbel_sample_kernel "
                                  "(off) vs the exponential draw alone (on)")


def test_unlike_forward_sources_are_not_compared(tmp_path, cli):
    # GIVEN compute-busy forward off, the expo_prof::forward span on; the draw alike (no rule said)
    s = _session(tmp_path, [], [], sources=("compute-busy", "expo_prof::forward"))
    out = ok_json(cli("compare", str(s), "--json"))
    r = metric(out, "forward_us_per_step")
    assert r["outcome"] == "not compared" and {k: r[k] for k in CHANGE_FIELDS} == dict.fromkeys(CHANGE_FIELDS)
    assert r["not_compared"] == "forward by compute-busy time (no forward span) (off) vs expo_prof::forward span (on)"
    assert _compared(metric(out, "critical_us_per_step"))
    assert out["mechanism"]["forward_slowdown_us"] is None and out["mechanism"]["exp_removed_us"] is not None


def test_a_primary_metric_that_is_not_compared_gives_no_verdict(tmp_path, cli):
    s = _session(tmp_path, ["cpu-fused-gumbel"], ["host-span"])
    out = ok_json(cli("compare", str(s), "--json", "--primary", "exp_us_per_step"))
    v = out["verdict"]
    assert v["decision"] == "inconclusive" and v["metric"] == "exp_us_per_step"
    assert v["change_pct"] is None and v["ci_pct"] is None and v["p"] is None
    assert "not compared" in v["statement"] and "_C::fused_gumbel_argmax" in v["statement"]


def test_runs_that_say_nothing_are_compared(tmp_path, cli):
    # GIVEN analyses without ranks (an analysis.json from before the rule was kept): no evidence either way
    s = _session(tmp_path, [], [])
    out = ok_json(cli("compare", str(s), "--json"))
    assert all(_compared(r) for r in out["metrics"])
    assert all(json.dumps(r).count("not compared") == 0 for r in out["metrics"])

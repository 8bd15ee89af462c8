"""``compare()`` in process: flags, marks, left-out runs and the sensitivity re-judgements (abtest/judging/judge.py).

The CLI tests (test_paired_vs_unpaired.py, test_compare_inputs.py) run the
real ``expo-prof compare`` in a subprocess; these call :func:`compare` on
runs built in memory, so that each figure of the result can be checked
against scipy on exactly the runs that should be in it.

GIVEN 6 interleaved off/on pairs where the first pair is a warm-up (both sides
~12 % low), one "on" run is an outlier (8 % low) and every other pair gains
about +2 %, plus a second metric (TPOT) without outliers, WHEN compared with
each choice of leaving flagged runs out, THEN the flags, per-run marks,
excluded runs, pairs and every sensitivity line follow from which pairs remain.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as ss

from expo_prof import __version__
from expo_prof.abtest.judging.judge import compare
from expo_prof.abtest.model import ENABLE, NO_DIFFERENCE
from expo_prof.abtest.inputs.sides import Loaded, Run, Side
from expo_prof.errors import BadInput

OFF = [880.0, 1000.0, 1006.0, 995.0, 1003.0, 998.0]
ON = [898.0, 1021.0, 1025.0, 940.0, 1024.0, 1019.0]  # on4 (index 3) is the outlier
TPOT_OFF = [52.0, 45.0, 45.2, 44.9, 45.1, 45.0]
TPOT_ON = [51.0, 44.1, 44.0, 44.2, 44.1, 43.9]
WARM, OUTLIER = 0, 3


def _loaded(paired=True):
    def side(name, tput, tpot):
        runs = [Run(label=f"{name}{i + 1}", source=f"mem:{name}{i + 1}",
                    values={"output_throughput": x, "mean_tpot_ms": y}) for i, (x, y) in enumerate(zip(tput, tpot))]
        return Side(name=name, runs=runs, sources=[f"mem:{name}"])

    return Loaded(a=side("off", OFF, TPOT_OFF), b=side("on", ON, TPOT_ON),
                  pairs=[(i, i) for i in range(6)] if paired else None, design_reason="built in memory")


def _kept_pairs(drop_pairs=(), drop_b=()):
    """Independent: the (off, on) values of the pairs whose two runs both remain."""
    keep = [i for i in range(6) if i not in drop_pairs and i not in drop_b]
    return np.array([OFF[i] for i in keep]), np.array([ON[i] for i in keep])


def _side_means(drop_pairs=(), drop_b=()):
    """Independent: the means of each side's remaining runs (a dropped "on" run leaves its "off" partner in)."""
    a = [v for i, v in enumerate(OFF) if i not in drop_pairs]
    b = [v for i, v in enumerate(ON) if i not in drop_pairs and i not in drop_b]
    return float(np.mean(a)), float(np.mean(b))


def _expected_decision(off, on):
    # With <= 5 pairs the sign-flip test cannot reach p < 0.05, so the paired t-test decides;
    # a throughput gain that is significant enables.
    p = ss.ttest_rel(on, off).pvalue
    return (ENABLE if p < 0.05 and on.mean() > off.mean() else NO_DIFFERENCE), p


def _by_name(res):
    return {m.name: m for m in res.metrics}


def test_flags_and_marks_of_warmup_and_outlier():
    res = compare(_loaded())
    # THEN the first run of each side is the warm-up and on4 the outlier (flag order: warm-ups, then outliers)
    assert [(f.kind, f.side, f.run, f.metric) for f in res.flags] == [
        ("warm-up", "off", "off1", "output_throughput"), ("warm-up", "on", "on1", "output_throughput"),
        ("outlier", "on", "on4", "output_throughput")]
    outlier = res.flags[2]
    others = np.delete(np.array(ON[1:]), OUTLIER - 1)  # the outlier is judged against the other non-warm-up runs
    assert outlier.value == 940.0 and outlier.reference == pytest.approx(np.median(others))
    # AND the warm-up marks a run on every metric, the outlier only on the metric it was found on
    m = _by_name(res)
    assert m["output_throughput"].a.flags == ["warm-up", "", "", "", "", ""]
    assert m["output_throughput"].b.flags == ["warm-up", "", "", "outlier", "", ""]
    assert m["mean_tpot_ms"].a.flags == m["mean_tpot_ms"].b.flags == ["warm-up", "", "", "", "", ""]
    # AND nothing is left out by default: all 6 pairs, values as measured
    assert res.design.excluded == [] and res.design.pairs == 6 and res.design.paired is True
    assert res.design.reason == "built in memory" and res.design.alpha == 0.05 and res.design.confidence == 0.95
    assert m["output_throughput"].a.values == OFF and m["output_throughput"].b.values == ON
    assert (res.a.name, res.a.sources, res.a.runs) == ("off", ["mem:off"], [f"off{i}" for i in range(1, 7)])
    assert (res.b.name, res.b.sources, res.b.runs) == ("on", ["mem:on"], [f"on{i}" for i in range(1, 7)])
    assert res.primary_metric == "output_throughput"
    # AND the main verdict is what scipy's paired t on all 6 pairs gives
    want, p = _expected_decision(np.array(OFF), np.array(ON))
    assert res.verdict.decision == want == NO_DIFFERENCE and res.verdict.p == pytest.approx(p, rel=1e-9)


def test_sensitivity_rejudges_each_choice_of_left_out_runs():
    res = compare(_loaded())
    choices = {
        "without the warm-up runs": ((WARM,), (), ["off1", "on1"]),
        "without the outlier runs": ((), (OUTLIER,), ["on4"]),
        "without the warm-up and outlier runs": ((WARM,), (OUTLIER,), ["off1", "on1", "on4"]),
    }
    assert [s.what for s in res.sensitivity] == list(choices)
    main = res.verdict.decision
    for s in res.sensitivity:
        drop_pairs, drop_b, runs = choices[s.what]
        off, on = _kept_pairs(drop_pairs, drop_b)
        want, p = _expected_decision(off, on)
        mean_a, mean_b = _side_means(drop_pairs, drop_b)
        change = 100 * (mean_b - mean_a) / mean_a
        ci = ss.ttest_rel(on, off).confidence_interval(0.95)
        # THEN each line re-judges exactly the remaining pairs, as scipy does
        assert s.runs == runs and s.metric == "output_throughput"
        assert s.p == pytest.approx(p, rel=1e-9) and s.change_pct == pytest.approx(change)
        assert s.ci_pct == pytest.approx([100 * ci.low / mean_a, 100 * ci.high / mean_a], rel=1e-9)
        assert s.decision == want and s.changes_verdict is (want != main)
        # AND its statement says so in words
        ci_text = f"(95% CI {100 * ci.low / mean_a:+.2f}% to {100 * ci.high / mean_a:+.2f}%)"
        assert s.statement.startswith(f"{s.what} ({', '.join(runs)}): output tok/s {change:+.2f}% {ci_text}")
        assert f", p={p:.3g} → {want}" in s.statement
        assert s.statement.endswith(f" (instead of: {main})" if want != main else f"→ {want}")
    # AND the verdict names every choice that would change it
    changing = [f"{s.what} the verdict would be: {s.decision}" for s in res.sensitivity if s.changes_verdict]
    assert changing and all(c in res.verdict.caveats for c in changing)
    assert not any(c.startswith("without the warm-up runs the verdict") for c in res.verdict.caveats)


@pytest.mark.parametrize("drop_warmup,drop_outliers", [(True, False), (False, True), (True, True)])
def test_dropping_flagged_runs_makes_that_the_main_analysis(drop_warmup, drop_outliers):
    res = compare(_loaded(), drop_warmup=drop_warmup, drop_outliers=drop_outliers)
    drop_pairs = (WARM,) if drop_warmup else ()
    drop_b = (OUTLIER,) if drop_outliers else ()
    off, on = _kept_pairs(drop_pairs, drop_b)
    want, p = _expected_decision(off, on)
    m = _by_name(res)["output_throughput"]
    # THEN the excluded runs are named and left out of each side (a run's pair partner stays in its side's mean)
    excluded = (["off1"] if drop_warmup else []) + (["on1"] if drop_warmup else []) + (["on4"] if drop_outliers else [])
    assert res.design.excluded == excluded
    assert m.a.values == [v for i, v in enumerate(OFF) if i not in drop_pairs]
    assert m.b.values == [v for i, v in enumerate(ON) if i not in drop_pairs and i not in drop_b]
    # AND the pairs are re-indexed to the remaining runs: the paired test sees exactly the complete pairs
    assert res.design.pairs == m.pairs == len(off)
    assert m.t_test.p == pytest.approx(p, rel=1e-9) and res.verdict.decision == want
    # AND the primary metric's own notes stay among the verdict's caveats next to the sensitivity ones
    assert m.notes and all(f"{m.label}: {n}" in res.verdict.caveats for n in m.notes)
    # AND the sensitivity shows the dropped runs put back and the others left out, each on the right pairs:
    # (what, pairs left out entirely, "on" runs left out) — worked out from which runs each choice removes
    sets = {"warm-up": ({WARM}, set()), "outlier": (set(), {OUTLIER})}
    sets["warm-up and outlier"] = ({WARM}, {OUTLIER})
    expected = []
    for name, (pairs_c, b_c) in sets.items():
        in_main = pairs_c <= set(drop_pairs) and b_c <= set(drop_b)
        if in_main:
            what, d_pairs, d_b = f"with the {name} runs put back", set(drop_pairs) - pairs_c, set(drop_b) - b_c
        else:
            what, d_pairs, d_b = f"without the {name} runs", set(drop_pairs) | pairs_c, set(drop_b) | b_c
        expected.append((what, d_pairs, d_b))
    assert [s.what for s in res.sensitivity] == [e[0] for e in expected]
    for s, (_, d_pairs, d_b) in zip(res.sensitivity, expected):
        off_s, on_s = _kept_pairs(tuple(d_pairs), tuple(d_b))
        want_s, p_s = _expected_decision(off_s, on_s)
        assert s.p == pytest.approx(p_s, rel=1e-9) and s.decision == want_s
        assert s.changes_verdict is (want_s != res.verdict.decision)


def test_unpaired_compare_keeps_every_run_and_rejudges_with_welch():
    res = compare(_loaded(paired=False), drop_outliers=True)
    m = _by_name(res)["output_throughput"]
    on = np.array([v for i, v in enumerate(ON) if i != OUTLIER])
    # THEN there are no pairs, and the main test is Welch's over the 6 off and 5 remaining on runs
    assert res.design.paired is False and res.design.pairs == 0 and m.pairs == 0
    ref = ss.ttest_ind(on, np.array(OFF), equal_var=False)
    assert m.t_test.name == "Welch t" and m.t_test.p == pytest.approx(ref.pvalue, rel=1e-9)
    assert res.design.excluded == ["on4"]


def test_primary_metric_can_be_chosen_and_must_exist():
    res = compare(_loaded(), primary="mean_tpot_ms")
    # THEN the verdict and the sensitivity are about TPOT (lower is better) ...
    assert res.primary_metric == "mean_tpot_ms" and res.verdict.metric == "mean_tpot_ms"
    assert all(s.metric == "mean_tpot_ms" for s in res.sensitivity)
    # ... and with no outlier on TPOT only the warm-up is a choice
    assert [s.what for s in res.sensitivity] == ["without the warm-up runs"]
    for wanted in ("nope", "p99_itl_ms"):  # unknown, and known but not measured by these runs
        with pytest.raises(BadInput) as ei:
            compare(_loaded(), primary=wanted)
        assert str(ei.value).endswith(": not a metric of these runs (have: output_throughput, mean_tpot_ms)")


@pytest.mark.parametrize("alpha", [0.0, 0.5, -0.1, 0.7])
def test_alpha_outside_the_open_interval_is_refused(alpha):
    with pytest.raises(BadInput, match=f"--alpha {alpha}: must be between 0 and 0.5"):
        compare(_loaded(), alpha=alpha)


def test_alpha_inside_is_used():
    # GIVEN alpha 0.01: the design records it and every per-metric judgement uses it
    res = compare(_loaded(), alpha=0.01, drop_warmup=True, drop_outliers=True)
    off, on = _kept_pairs((WARM,), (OUTLIER,))
    p = ss.ttest_rel(on, off).pvalue
    assert res.design.alpha == 0.01
    assert _by_name(res)["output_throughput"].significant is bool(p < 0.01)


def test_workload_mismatch_is_refused_unless_allowed_and_warnings_are_kept():
    # GIVEN side B run with another model than side A, and a loader warning
    loaded = _loaded()
    for r in loaded.a.runs:
        r.workload = {"model": "m-a"}
    for r in loaded.b.runs:
        r.workload = {"model": "m-b"}
    loaded.warnings = ["from the loader"]
    # THEN by default compare refuses in one line naming the way out ...
    with pytest.raises(BadInput, match=r"--allow-mismatch\)$"):
        compare(loaded)
    # ... and with allow_mismatch it compares, keeping the loader's warning first and saying why it went on
    res = compare(loaded, allow_mismatch=True)
    assert res.warnings[0] == "from the loader"
    assert len(res.warnings) == 2 and res.warnings[1].endswith("(compared anyway: --allow-mismatch)")


def test_shared_workload_is_reported_with_infinity_as_null():
    # GIVEN both sides at request rate "inf" (as vllm bench writes it) on one model
    loaded = _loaded()
    for r in loaded.a.runs + loaded.b.runs:
        r.workload = {"model": "m", "request_rate": float("inf"), "num_prompts": 48}
    res = compare(loaded)
    # THEN the workload is shown once, with the infinite rate as null (JSON has no infinity)
    assert res.workload["model"] == "m" and res.workload["num_prompts"] == 48
    assert "request_rate" in res.workload and res.workload["request_rate"] is None


def test_runs_without_flags_or_a_primary_metric():
    # GIVEN steady runs (no warm-up, no outlier) THEN no flags and nothing to re-judge
    loaded = _loaded()
    for side, vals in ((loaded.a, [1000.0, 1001.0, 999.0, 1002.0, 998.5, 1000.5]),
                       (loaded.b, [1020.0, 1019.0, 1021.5, 1018.0, 1022.0, 1020.5])):
        for r, v in zip(side.runs, vals):
            r.values = {"output_throughput": v}
    res = compare(loaded)
    assert res.flags == [] and res.sensitivity == [] and res.design.excluded == []
    assert res.tool_version == __version__ and res.mechanism is not None and res.mechanism.available is False
    # GIVEN only a mechanism metric (no throughput or latency) THEN there is no primary metric and no verdict on one
    for r in loaded.a.runs + loaded.b.runs:
        r.values = {"hidden_exp_us_per_step": r.values["output_throughput"] / 100}
    res = compare(loaded)
    assert res.primary_metric is None and res.verdict.metric is None and res.sensitivity == []
    assert [m.name for m in res.metrics] == ["hidden_exp_us_per_step"]


def test_an_outlier_on_side_a_is_dropped_from_side_a():
    # GIVEN the same runs with the outlier moved to the "off" side (off4 8 % high), unpaired
    loaded = _loaded(paired=False)
    off = [1000.0, 1002.0, 999.0, 1081.0, 1001.0, 1000.5]
    for r, v in zip(loaded.a.runs, off):
        r.values = {"output_throughput": v}
    for r, v in zip(loaded.b.runs, ON):
        r.values = {"output_throughput": v}
    res = compare(loaded, drop_outliers=True)
    m = _by_name(res)["output_throughput"]
    assert ("outlier", "off", "off4") in [(f.kind, f.side, f.run) for f in res.flags]
    assert "off4" in res.design.excluded and 1081.0 not in m.a.values and len(m.a.values) == 5

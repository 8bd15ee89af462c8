"""The demo's last line (expo_prof.cli.demo.answer_line) on the committed switchback sample: the measured saving,
its CI and the output tok/s it means, in words that follow the CI (issue 33, item 6)."""

from __future__ import annotations

import msgspec
from shared_paths import REPO  # type: ignore[import-not-found]  (tests/ is on sys.path)

from expo_prof.cli.demo import answer_line
from expo_prof.pipeline import run
from expo_prof.words import fmt_ns


def _saving():
    (sv,) = run([REPO / "traces/samples/tiny-cpu-switchback"]).recordings[0].savings
    return sv


def test_a_ci_above_zero_says_saves_with_its_ci_and_the_tok_s():
    """GIVEN the committed switchback sample (its saving's CI above zero) WHEN the demo words it THEN it says the
    overlay saves the mean per step with both CI bounds, and the output tok/s change with its CI."""
    sv = _saving()
    lo, hi = sorted(sv.saving.ci_ns)
    assert lo > 0
    line = answer_line(sv)
    assert line.startswith(f"the overlay saves {fmt_ns(sv.saving.mean_ns)}/step (95% CI {fmt_ns(lo)} to {fmt_ns(hi)})")
    t_lo, t_hi = sorted(sv.tokps_ci_pct)
    assert f"output tok/s {sv.tokps_change_pct:+.1f}% (95% CI {t_lo:+.1f}% to {t_hi:+.1f}%)" in line
    assert f"{sv.pairs} block pairs" in line


def test_a_ci_across_zero_says_no_difference_shown_with_its_width():
    """GIVEN the sample's saving with its CI moved across zero WHEN worded THEN "no difference shown", the width
    of the interval and "within this run's noise" — never "saves" or "costs"; GIVEN a cost (CI below zero) THEN
    "costs" and "keep it off"; GIVEN no pair of blocks THEN "not measured" with what to run."""
    sv = _saving()
    width = 2 * sv.saving.mean_ns
    across = msgspec.structs.replace(sv, saving=msgspec.structs.replace(
        sv.saving, ci_ns=[-0.5 * sv.saving.mean_ns, 1.5 * sv.saving.mean_ns]))
    line = answer_line(across)
    assert line.startswith("no difference shown") and f"(width {fmt_ns(width)}) spans zero" in line
    assert "within this run's noise" in line and "saves" not in line and "costs" not in line
    cost = msgspec.structs.replace(sv, saving=msgspec.structs.replace(
        sv.saving, mean_ns=-sv.saving.mean_ns, ci_ns=[-c for c in sv.saving.ci_ns]))
    assert answer_line(cost).startswith(f"the overlay costs {fmt_ns(sv.saving.mean_ns)}/step")
    assert answer_line(cost).endswith("keep it off here")
    assert answer_line(msgspec.structs.replace(sv, saving=None)).startswith("saving not measured")
    assert "--budget" in answer_line(None)


def _sequential():
    (sv,) = run([REPO / "traces/samples/tiny-cpu-sequential"]).recordings[0].savings
    return sv


def test_a_sequential_run_leads_with_its_decision():
    """GIVEN the committed sequential sample (keep off, settled) WHEN the demo words it THEN the decision comes
    first, then the cost with its confidence sequence and the tok/s; the load it was measured under; and only the
    sign carries to another machine. GIVEN the same sequence moved inside the margin, or left undecided, THEN
    "no effect beyond the margin" / "undecided" with the margin in both units and the steps still needed."""
    from expo_prof.analysis.saving.words import margin_words

    sv = _sequential()
    sq = sv.sequence
    assert sq is not None and sq.decision == "keep off" and sq.lo_ns < sq.hi_ns < 0
    line = answer_line(sv, "4 requests in flight")
    assert line.startswith(f"keep off: the overlay costs {fmt_ns(-sq.mean_ns)}/step (95% confidence sequence "
                           f"{fmt_ns(-sq.hi_ns)} to {fmt_ns(-sq.lo_ns)}), output tok/s ")
    assert "on this machine under 4 requests in flight" in line and line.endswith("only the sign carries over")
    inside = msgspec.structs.replace(sq, decision="no effect beyond the margin", lo_ns=-1.0, hi_ns=1.0, mean_ns=0.0)
    line = answer_line(msgspec.structs.replace(sv, sequence=inside))
    assert line.startswith(f"no effect beyond the margin {margin_words(sq.margin_ns, sv.baseline_cadence_ns)}")
    assert "the overlay does not matter here" in line
    open_ = msgspec.structs.replace(sq, decision="undecided", settled_at=None, pairs_needed=10)
    line = answer_line(msgspec.structs.replace(sv, sequence=open_, steps_needed=10 * 2 * sv.block_steps))
    assert line.startswith("undecided when the budget ended")
    assert f"about {10 * 2 * sv.block_steps} more steps would settle it" in line

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
    assert "--output-len" in answer_line(None)

"""The report's "saved per step" card of a switchback run in a real headless Chromium (issue 33, items 3 and 5).

GIVEN the committed switchback sample (traces/samples/tiny-cpu-switchback: a real vLLM CPU run)
WHEN ``expo-prof report``'s page loads offline
THEN the card shows the saving with its CI in the words the tables use, and each arm's step broken into
forward + sampler + rest — the JSON's ``baseline_parts`` / ``arm_parts``, as the one Python formatter prints them.
"""

from __future__ import annotations

from pathlib import Path

from expo_prof.html.build import report_document
from expo_prof.pipeline import run as pipeline_run
from expo_prof.words import fmt_ns  # the pages' Expo.fmtNs prints what the one Python formatter prints

RUN = Path(__file__).resolve().parents[2] / "traces" / "samples" / "tiny-cpu-switchback"


def test_the_switchback_card_breaks_each_arm_step_down(tmp_path, open_page):
    result = pipeline_run([RUN])
    out = tmp_path / "report.html"
    out.write_text(report_document([RUN], result=result).text)
    (sv,) = result.document.recordings[0].savings
    # WHEN the page loads offline
    page = open_page(out, offline=True)
    title, value, detail = (page.evaluate(f"document.querySelector('#c-saving .{c}').textContent")
                            for c in ("k", "v", "d"))
    # THEN the saving, its CI (which lies above zero here: no "no difference shown")
    assert title == "saved per step (switchback): enable" and value == fmt_ns(sv.saving.mean_ns)
    assert sv.saving.ci_ns[0] > 0 and "no difference shown" not in detail
    # AND each arm's cadence as forward + sampler + rest
    for arm, p in (("off", sv.baseline_parts), ("on", sv.arm_parts)):
        want = (f"cadence {arm} {fmt_ns(p.cadence_ns)} = forward {fmt_ns(p.forward_ns)} + sampler {fmt_ns(p.sampler_ns)}"
                f" + rest {fmt_ns(p.rest_ns)}")
        assert want in detail, detail
    assert page.errors() == []

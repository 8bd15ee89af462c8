"""The report leads with the answer (issue 39, item 6), in a real headless Chromium.

GIVEN the committed real switchback run that decided as it went on the vLLM CPU server
(traces/samples/tiny-cpu-sequential: keep off, the overlay costs ~10 % of output tok/s there) WHEN
``expo-prof report``'s page loads offline THEN its first card is the decision with the measured saving and its
95 % confidence sequence and margin — the figures of ``analyze --json`` — and the overlap figures (hidden
fraction, the tok/s bound) come after it and say that they are overlap.
"""

from __future__ import annotations

from html_helpers import page_data  # type: ignore[import-not-found]

from expo_prof.html.build import report_document
from expo_prof.pipeline import run as pipeline_run
from expo_prof.words import fmt_ns
from shared_paths import REPO

RUN = REPO / "traces" / "samples" / "tiny-cpu-sequential"


def test_first_card_is_the_decision(tmp_path, open_page):
    result = pipeline_run([RUN])
    (sv,) = result.document.recordings[0].savings
    doc = report_document([RUN], result=result)
    out = tmp_path / "report.html"
    out.write_text(doc.text)
    assert page_data(doc.text)["recordings"][0]["savings"][0]["sequence"]["decision"] == sv.decision
    page = open_page(out, offline=True)
    assert page.errors() == []
    ids = page.evaluate("Array.from(document.querySelectorAll('#cards .card')).map((c) => c.id)")
    # THEN the saving card comes first, before every overlap figure
    assert ids[0] == "c-saving" and ids.index("c-hidden") > 0 and ids.index("c-toks") > 0, ids
    title, value, detail = (page.evaluate(f"document.querySelector('#c-saving .{c}').textContent")
                            for c in ("k", "v", "d"))
    sq = sv.sequence
    assert sq is not None and sv.decision == sq.decision == "keep off"
    assert title == "saved per step (switchback): keep off" and value == fmt_ns(sq.mean_ns)
    assert detail.startswith(f"95% confidence sequence {fmt_ns(sq.lo_ns)} to {fmt_ns(sq.hi_ns)}")
    assert f"margin ±{fmt_ns(sq.margin_ns)}" in detail and f"settled at block pair {sq.settled_at}" in detail
    # AND the overlap figure says it is overlap, not saving
    assert page.evaluate("document.querySelector('#c-hidden .k').textContent") == "hidden fraction (overlap, not saving)"

"""The report page's "step" card (issue 33 item 5): the step's own time, the critical path's share of it, prefill
and decode apart, the batch and q — the figures `analyze --json` gives in summary.step_breakdown — in a real headless
Chromium, on the committed vLLM CPU runs."""

from __future__ import annotations

from pathlib import Path

from html_helpers import page_data  # type: ignore[import-not-found]  # noqa: F401  (the html tests' helpers)

from expo_prof.html.build import report_document
from expo_prof.pipeline import run as pipeline_run
from expo_prof.words import fmt_ns

SAMPLES = Path(__file__).resolve().parents[2] / "traces" / "samples"


def _page(tmp_path: Path, open_page, src: Path):
    result = pipeline_run([src])
    doc = report_document([src], compare=None, result=result)
    html = tmp_path / "report.html"
    html.write_text(doc.text)
    page = open_page(html, offline=True)
    assert page.errors() == []
    text = lambda part: page.evaluate(f"document.querySelector('#c-step .{part}').textContent")  # noqa: E731
    return result.document.summary.step_breakdown, text


def test_step_card_shows_the_step_breakdown(tmp_path, open_page):
    """GIVEN the real overlay-on run (vLLM's step annotations, the overlay log beside the trace) WHEN its report
    loads THEN the step card's value is the steps' own time p50 and its detail gives the critical path's share of
    the step, prefill and decode steps with their counts, p50 and share, the batch p50 and q's shape and dtype,
    as summary.step_breakdown has them."""
    st, text = _page(tmp_path, open_page, SAMPLES / "tiny-cpu-off-on" / "02-on")
    assert st is not None and st.prefill is not None and st.decode is not None and st.batch is not None
    assert text("v") == fmt_ns(st.overall.own_ns.p50)
    d = text("d")
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    assert d.startswith(f"critical path {pct(st.overall.critical_share)} of the step · cadence p50 "
                        f"{fmt_ns(st.overall.cadence_ns.p50)} (to the next step)")
    for name, g in (("prefill", st.prefill), ("decode", st.decode)):
        assert f"{name} {g.step_count} (p50 {fmt_ns(g.own_ns.p50)}, {pct(g.critical_share)})" in d
    assert f"batch p50 {st.batch.p50}" in d and f"q {st.q[0].rows} × {st.q[0].vocab} {st.q[0].dtype}" in d


def test_step_card_says_what_the_trace_cannot_give(tmp_path, open_page, realtraces):
    """GIVEN a real vLLM CPU Kineto trace without an overlay log WHEN its report loads THEN the step card says q's
    shape and dtype are not measured, and why."""
    st, text = _page(tmp_path, open_page, realtraces / "vllm-cpu" / "rank0-default-with-stack.pt.trace.json.gz")
    assert "q shape and dtype" in st.missing
    assert f"q shape and dtype: not measured — {st.missing['q shape and dtype']}" in text("d")

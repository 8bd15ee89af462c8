"""The report page in a real headless Chromium: headline figures, charts, tables, A/B, manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from html_helpers import fmt_ns, page_data, require, signed_pct  # type: ignore[import-not-found]

from expo_prof import readers
from expo_prof.analysis import analyze
from expo_prof.html.build import report_document


def build(tmp_path: Path, *srcs: Path) -> tuple[Path, dict]:
    doc = report_document(list(srcs))
    out = tmp_path / "report.html"
    out.write_text(doc.text)
    return out, page_data(doc.text)


def card(page, cid: str) -> str:
    return page.evaluate(f"document.querySelector('#{cid} .v').textContent")


def test_single_run_report_shows_the_analysis(tmp_path, open_page, run_on):
    """GIVEN a recorded run WHEN its report loads offline in Chromium THEN the headline cards state the analysis'
    hidden fraction, exposed and forward time per step and the tok/s estimate; the per-step chart holds every step's
    hidden/exposed time; the per-rank table has one row per rank; the manifest is shown; no request, no error."""
    html, d = build(tmp_path, run_on)
    page = open_page(html, offline=True)
    assert page.errors() == [] and [u for u in page.requests() if not u.startswith("file://")] == []
    res = analyze(readers.load([run_on]).timelines)
    s = res.summary
    assert card(page, "c-hidden") == f"{100 * s.hidden_fraction:.1f}%"
    assert card(page, "c-exposed") == fmt_ns(s.per_step.exposed_ns.mean)
    assert card(page, "c-forward") == fmt_ns(s.per_step.forward_ns.mean)
    steps = [st for st in res.steps if st.step is not None]
    step_ns = sum(st.end_ns - st.start_ns for st in steps) / len(steps)
    effect = -s.per_step.exposed_ns.mean / step_ns
    assert card(page, "c-toks") == signed_pct(effect)
    chart = page.evaluate("(() => { const g = document.getElementById('steps-chart'); return g.data.map(t => [t.name, t.x, t.y]); })()")
    byname = {n: (x, y) for n, x, y in chart}
    assert byname["hidden"][0] == sorted(st.step for st in steps)
    assert sum(byname["hidden"][1]) * 1e3 == pytest.approx(sum(st.hidden_ns for st in steps))
    assert sum(byname["exposed"][1]) * 1e3 == pytest.approx(sum(st.exposed_ns for st in steps))
    rows = page.evaluate("document.querySelectorAll('#rank-tbl tbody tr').length")
    assert rows == len(res.ranks)
    manifest = json.loads((run_on / "manifest.json").read_text())
    kv = page.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('table.manifest tbody tr')).map(r => [r.cells[0].textContent, r.cells[1].textContent]))")
    assert kv["overlay"] == "on" and kv["metrics.output_throughput"] == str(manifest["metrics"]["output_throughput"])
    assert page.evaluate("document.getElementById('ab')") is None  # one run: no A/B section


def test_session_report_has_ab_section(tmp_path, open_page, session_dir):
    """GIVEN a session of an overlay-off and an overlay-on run WHEN its report loads THEN the A/B section lists
    each side's measured tok/s and hidden fraction with the difference of the means, and both manifests."""
    html, d = build(tmp_path, session_dir)
    page = open_page(html)
    assert page.errors() == []
    assert d["ab"] is not None and d["runs"][d["primary"]]["overlay"] == "on"
    rows = page.evaluate("Array.from(document.querySelectorAll('#ab-tbl tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent))")
    by = {r[0]: r for r in rows}
    m_off = json.loads((session_dir / "01-off" / "manifest.json").read_text())["metrics"]["output_throughput"]
    m_on = json.loads((session_dir / "02-on" / "manifest.json").read_text())["metrics"]["output_throughput"]
    assert by["output tok/s"][1] == f"{m_off:.1f}" and by["output tok/s"][2] == f"{m_on:.1f}"
    delta = m_on - m_off
    assert by["output tok/s"][5] == ("+" if delta > 0 else "") + f"{delta:.1f}"
    h_off = analyze(readers.load([session_dir / "01-off"]).timelines).summary.hidden_fraction
    h_on = analyze(readers.load([session_dir / "02-on"]).timelines).summary.hidden_fraction
    assert by["hidden fraction"][1] == f"{100 * h_off:.1f}%" and by["hidden fraction"][2] == f"{100 * h_on:.1f}%"
    assert by["hidden fraction"][7] == ("better" if h_on > h_off else "worse")
    assert page.evaluate("document.querySelectorAll('#run-list details').length") == 2


def test_ab_section_takes_a_compare_result(tmp_path, open_page, session_dir):
    """GIVEN a statistics object from a future `compare` (any msgspec Struct / dataclass) WHEN the report is built
    with it THEN the A/B section renders its rows as given."""
    from dataclasses import dataclass

    @dataclass
    class Row:
        metric: str
        p_value: float

    @dataclass
    class Comparison:
        method: str
        metrics: list

    cmp = Comparison("bootstrap", [Row("output_throughput", 0.031), Row("median_tpot_ms", 0.2)])
    doc = report_document([session_dir], compare=cmp)
    out = tmp_path / "report.html"
    out.write_text(doc.text)
    page = open_page(out)
    assert page.errors() == []
    cells = page.evaluate("Array.from(document.querySelectorAll('#ab-compare td')).map(c => c.textContent)")
    assert "bootstrap" in cells and "output_throughput" in cells and "0.031" in cells


def _samples():
    from html_helpers import sample_runs  # type: ignore[import-not-found]

    return sample_runs() or [None]


@pytest.mark.parametrize("run", _samples(), ids=lambda p: p.name if p else "no-samples")
def test_committed_sample_run_reports_open(tmp_path, open_page, run):
    """GIVEN each real run committed under traces/samples WHEN its report loads offline THEN no error and the
    hidden-fraction card shows the analysis' value."""
    require(run is not None, "a recorded run under traces/samples/")
    html, d = build(tmp_path, run)
    page = open_page(html, offline=True)
    assert page.errors() == []
    h = d["runs"][d["primary"]]["headline"]["hidden_fraction"]
    assert card(page, "c-hidden") == ("-" if h is None else f"{100 * h:.1f}%")


def _sample_sessions():
    from html_helpers import SAMPLES  # type: ignore[import-not-found]

    found = sorted(p.parent for p in SAMPLES.rglob("session.json")) if SAMPLES.is_dir() else []
    return found or [None]


@pytest.mark.parametrize("session", _sample_sessions(), ids=lambda p: p.name if p else "no-sample-session")
def test_committed_sample_session_has_ab_section(tmp_path, open_page, session):
    """GIVEN each real off/on session committed under traces/samples (vLLM recorded by expo-prof) WHEN its report
    loads offline THEN the A/B table shows each run's measured output tok/s from its manifest."""
    require(session is not None, "a recorded session under traces/samples/")
    html, d = build(tmp_path, session)
    page = open_page(html, offline=True)
    assert page.errors() == []
    rows = page.evaluate("Array.from(document.querySelectorAll('#ab-tbl tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent))")
    tok = {r[0]: r for r in rows}["output tok/s"]
    off = [r["metrics"]["output_throughput"] for r in d["runs"] if r["overlay"] == "off"]
    on = [r["metrics"]["output_throughput"] for r in d["runs"] if r["overlay"] == "on"]
    assert tok[1] == " · ".join(f"{v:.1f}" for v in off) and tok[2] == " · ".join(f"{v:.1f}" for v in on)


def test_html_reporter_renders_an_analysis_result(tmp_path, open_page, vllm_cpu_trace):
    """GIVEN an AnalysisResult of the real vLLM CPU trace WHEN rendered by HtmlReporter (the Reporter protocol, like
    TableReporter/JsonReporter) THEN the page opens without errors and its hidden-fraction card states the result's."""
    import io

    from expo_prof.html import HtmlReporter

    res = analyze(readers.load([vllm_cpu_trace]).timelines)
    buf = io.StringIO()
    HtmlReporter(label="fp64-gumbel").render(res, buf)
    out = tmp_path / "r.html"
    out.write_text(buf.getvalue())
    page = open_page(out)
    assert page.errors() == []
    assert card(page, "c-hidden") == f"{100 * res.summary.hidden_fraction:.1f}%"

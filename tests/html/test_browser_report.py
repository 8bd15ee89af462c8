"""The report page in a real headless Chromium: headline figures, charts, tables, A/B, manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from html_helpers import page_data, require, to_precision3  # type: ignore[import-not-found]


from expo_prof import readers
from expo_prof.analysis import analyze
from expo_prof.html.build import report_document
from expo_prof.pipeline import run as pipeline_run
from expo_prof.words import fmt_ns  # the pages' Expo.fmtNs prints what the one Python formatter prints


def build(tmp_path: Path, *srcs: Path) -> tuple[Path, dict]:
    """The page as `expo-prof report` builds it: the pipeline once, compare's result as the A/B section."""
    from expo_prof.abtest.from_pipeline import compare_recordings

    result = pipeline_run(list(srcs))
    doc = report_document(list(srcs), compare=compare_recordings(result), result=result)
    out = tmp_path / "report.html"
    out.write_text(doc.text)
    return out, page_data(doc.text)


def card(page, cid: str) -> str:
    return page.evaluate(f"document.querySelector('#{cid} .v').textContent")


def test_single_run_report_shows_the_analysis(tmp_path, open_page, run_on):
    """GIVEN a recorded run WHEN its report loads offline in Chromium THEN the headline cards state the pipeline's
    figures (the same `analyze --json` prints): hidden fraction and its one-line headline, exposed, forward and
    sampler wait per step, and the tok/s *upper bound* (the critical path, exposed ∪ wait, over step time: the
    two overlap when the lane's draw runs past the sampler's start, so never their sum); the per-step chart holds
    every step's hidden/exposed time; the per-rank table has one row per rank; the manifest is shown; no request,
    no error."""
    html, d = build(tmp_path, run_on)
    page = open_page(html, offline=True)
    assert page.errors() == [] and [u for u in page.requests() if not u.startswith("file://")] == []
    res = pipeline_run([run_on])
    s = res.document.summary
    assert card(page, "c-hidden") == f"{100 * s.hidden_fraction:.1f}%"
    assert page.evaluate("document.querySelector('#c-hidden .d').textContent") == res.recordings[0].headline
    assert card(page, "c-exposed") == fmt_ns(s.per_step.exposed_ns.mean)
    assert card(page, "c-forward") == fmt_ns(s.per_step.forward_ns.mean)
    assert card(page, "c-wait") == fmt_ns(s.per_step.wait_ns.mean) and s.per_step.wait_ns.mean > 0
    steps = [st for st in res.document.steps if st.step is not None]
    step_ns = sum(st.own_ns for st in steps) / len(steps)  # the steps' own time (the step card's)
    assert s.per_step.critical_ns.mean <= s.per_step.exposed_ns.mean + s.per_step.wait_ns.mean
    bound = s.per_step.critical_ns.mean / step_ns
    assert card(page, "c-toks") == f"≤ +{100 * bound:.2f}%"
    assert "upper bound" in page.evaluate("document.querySelector('#c-toks .k').textContent")
    chart = page.evaluate("(() => { const g = document.getElementById('steps-chart'); return g.data.map(t => [t.name, t.x, t.y]); })()")
    byname = {n: (x, y) for n, x, y in chart}
    assert byname["hidden"][0] == sorted(st.step for st in steps)
    assert sum(byname["hidden"][1]) * 1e3 == pytest.approx(sum(st.hidden_ns for st in steps))
    assert sum(byname["exposed"][1]) * 1e3 == pytest.approx(sum(st.exposed_ns for st in steps))
    rows = page.evaluate("document.querySelectorAll('#rank-tbl tbody tr').length")
    assert rows == len(res.document.ranks)
    manifest = json.loads((run_on / "manifest.json").read_text())
    kv = page.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('table.manifest tbody tr'))"
                       ".map(r => [r.cells[0].textContent, r.cells[1].textContent]))")
    assert kv["overlay"] == "on" and kv["metrics.output_throughput"] == str(manifest["metrics"]["output_throughput"])
    assert page.evaluate("document.getElementById('ab')") is None  # one run: no A/B section


def test_session_report_ab_section_is_compares_result(tmp_path, open_page, session_dir, capsys):
    """GIVEN a session of an overlay-off and an overlay-on run WHEN its report loads THEN the A/B section is
    `expo-prof compare --json` on the same session, number for number: per metric each run's values, the
    means, the change, its 95 % CI, p and outcome; the verdict; the mechanism; and the headline cards of the
    primary (on) run equal `analyze --json` of that run."""
    from expo_prof.cli.main import main

    html, d = build(tmp_path, session_dir)
    page = open_page(html)
    assert page.errors() == []
    with pytest.raises(SystemExit) as ei:
        main(["compare", str(session_dir), "--json"])
    cmp_out, err = capsys.readouterr()
    assert ei.value.code == 0, err
    cmp = json.loads(cmp_out)
    assert d["ab"] is not None and d["recordings"][d["primary"]]["overlay"] == "on"
    assert d["ab"]["compare"]["metrics"] == cmp["metrics"] and d["ab"]["verdict"] == cmp["verdict"]
    rows = page.evaluate("Array.from(document.querySelectorAll('#ab-tbl tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent))")
    by = {r[0]: r for r in rows}
    assert set(by) == {m["label"] for m in cmp["metrics"]}
    pct = lambda x: "–" if x is None else ("+" if x > 0 else "−" if x < 0 else "") + f"{abs(x):.2f}%"  # noqa: E731
    for m in cmp["metrics"]:
        row = by[m["label"]]
        assert row[5] == pct(m["change_pct"]), m["name"]
        assert row[6] == ("–" if m["ci_pct"] is None else f"{pct(m['ci_pct'][0])} … {pct(m['ci_pct'][1])}")
        p = (m["t_test"] or {}).get("p")
        assert row[7] == ("–" if p is None else to_precision3(p))
        assert row[8] == m["outcome"]
    tok = by["output tok/s"]
    m_off = json.loads((session_dir / "01-off" / "manifest.json").read_text())["metrics"]["output_throughput"]
    m_on = json.loads((session_dir / "02-on" / "manifest.json").read_text())["metrics"]["output_throughput"]
    assert tok[1] == f"{m_off:.1f}" and tok[2] == f"{m_on:.1f}"
    # (the decision said once: the statement's own leading "decision: " is not repeated after it)
    v = cmp["verdict"]
    reason = v["statement"].removeprefix(v["decision"] + ": ")
    assert reason != v["statement"]  # the statement does start with its decision: the check below bites
    assert page.evaluate("document.getElementById('ab-verdict').textContent") == f"verdict: {v['decision']} — {reason}"
    assert page.evaluate("document.getElementById('ab-mechanism').textContent") == (
        f"mechanism: {cmp['mechanism']['statement']}")
    with pytest.raises(SystemExit) as ei:
        main(["analyze", str(session_dir / "02-on"), "--json"])
    on_doc = json.loads(capsys.readouterr()[0])
    assert card(page, "c-hidden") == f"{100 * on_doc['summary']['hidden_fraction']:.1f}%"
    assert page.evaluate("document.querySelectorAll('#run-list details').length") == 2


def test_report_with_op_speaks_of_the_op(tmp_path, open_page, nccl_trace):
    """GIVEN a real NCCL trace and --op nccl WHEN the report loads THEN no card speaks of the sampler or tok/s, and
    the figures are the pipeline's for that op."""
    doc = report_document([nccl_trace], op="nccl")
    out = tmp_path / "r.html"
    out.write_text(doc.text)
    page = open_page(out)
    assert page.errors() == []
    ids = page.evaluate("Array.from(document.querySelectorAll('#cards .card')).map(c => c.id)")
    assert ids == ["c-hidden", "c-exposed", "c-forward"]
    text = page.evaluate("document.body.innerText").lower()
    for word in ("exponential", "sampler", "tok/s"):
        assert word not in text, word
    res = pipeline_run([nccl_trace], __import__("expo_prof.pipeline", fromlist=["Options"]).Options.make(op="nccl"))
    assert card(page, "c-hidden") == f"{100 * res.document.summary.hidden_fraction:.1f}%"


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
    h = d["recordings"][d["primary"]]["headline"]["hidden_fraction"]
    assert card(page, "c-hidden") == ("–" if h is None else f"{100 * h:.1f}%")


def _sample_sessions():
    from html_helpers import SAMPLES  # type: ignore[import-not-found]

    found = sorted(p.parent for p in SAMPLES.rglob("session.json")) if SAMPLES.is_dir() else []
    return found or [None]


@pytest.mark.parametrize("session", _sample_sessions(), ids=lambda p: p.name if p else "no-sample-session")
def test_committed_sample_session_has_ab_section(tmp_path, open_page, session):
    """GIVEN each real off/on session committed under traces/samples (vLLM recorded by expo-prof) WHEN its report
    loads offline THEN the A/B table shows each run's measured output tok/s from its manifest, the change that
    compare computes, and an honest verdict for one run per side."""
    require(session is not None, "a recorded session under traces/samples/")
    html, d = build(tmp_path, session)
    page = open_page(html, offline=True)
    assert page.errors() == []
    rows = page.evaluate("Array.from(document.querySelectorAll('#ab-tbl tbody tr')).map(r => Array.from(r.cells).map(c => c.textContent))")
    tok = {r[0]: r for r in rows}["output tok/s"]
    off = [r["metrics"]["output_throughput"] for r in d["recordings"] if r["overlay"] == "off"]
    on = [r["metrics"]["output_throughput"] for r in d["recordings"] if r["overlay"] == "on"]
    assert tok[1] == " · ".join(f"{v:.1f}" for v in off) and tok[2] == " · ".join(f"{v:.1f}" for v in on)
    change = 100 * (sum(on) / len(on) - sum(off) / len(off)) / (sum(off) / len(off))
    assert tok[5] == ("+" if change > 0 else "−") + f"{abs(change):.2f}%"
    if len(off) == len(on) == 1:
        assert tok[6] == "–" and tok[8] == "not testable"  # one run per side: no CI, no test


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


def test_compare_and_ab_section_name_forward_by_its_source(tmp_path, open_page, session_dir, capsys):
    """GIVEN a session of two recorded runs whose forward is timed by the expo_prof::forward span WHEN compared
    (tables and JSON) and reported THEN the forward metric is "forward (expo_prof::forward span) / step" in
    compare's JSON, its printed table and the report's A/B table, and the why line names the span."""
    from expo_prof.cli.main import main

    label = "forward (expo_prof::forward span) / step"
    with pytest.raises(SystemExit) as ei:
        main(["compare", str(session_dir), "--json"])
    out, err = capsys.readouterr()
    assert ei.value.code == 0, err
    cmp = json.loads(out)
    assert {m["name"]: m["label"] for m in cmp["metrics"]}["forward_us_per_step"] == label
    with pytest.raises(SystemExit) as ei:
        main(["compare", str(session_dir), "--all-metrics"])
    text = " ".join(capsys.readouterr()[0].split())
    assert "forward (expo_prof::forward span)" in text and "forward / step" not in text
    assert "forward (expo_prof::forward span) takes" in cmp["mechanism"]["statement"]  # both sides timed it
    html, _ = build(tmp_path, session_dir)
    page = open_page(html)
    assert page.errors() == []
    rows = page.evaluate("Array.from(document.querySelectorAll('#ab-tbl tbody tr')).map(r => r.cells[0].textContent)")
    assert label in rows and "forward / step" not in rows

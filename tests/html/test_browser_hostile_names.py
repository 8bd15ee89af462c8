"""Hostile names in every page (issue 27): never markup or script, never reordering text, never a 1 MB line.

GIVEN the GENERATED run of tests/support/hostile_names.py (a real vLLM CPU trace whose ops are renamed to a
script closer, an ``<img onerror>``, a right-to-left override, an ESC sequence and a 1 MiB name, its thread to
markup with an unclosed isolate), taken as the instances with ``--op ^EVIL``; a verify.json holding the same and
fields of the wrong type; and A/B tables whose run labels are the same WHEN the timeline, the report (with its
verify section) and compare's page load in a real headless Chromium THEN no script runs and nothing is injected,
control and bidirectional-formatting characters show as visible ``\\uXXXX`` escapes (the text renders in
logical order), a 1 MiB name is shown cut with the count of the rest and is held once in the page.
"""

from __future__ import annotations

import csv
import html
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from html_helpers import page_data, wait_for  # type: ignore[import-not-found]

from expo_prof.html.build import timeline_document
from support.hostile_names import HUGE, IMG, OP, RTL, SCRIPT, THREAD, hostile_run

#: Characters no page may show as themselves (static/common.js HIDDEN; ESC stands for the C0 controls).
RAW = ("\u202e", "\u2067", "\x1b")
#: What a successful injection would leave behind (the names' handlers set window.__xss).
INJECTED = """(() => ({
  xss: window.__xss === undefined ? null : String(window.__xss),
  img: document.querySelectorAll('img').length,
  handlers: Array.from(document.querySelectorAll('*')).filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
  raw: [...'\\u202e\\u2067\\u001b'].filter(c => document.body.innerText.includes(c) ||
       Array.from(document.querySelectorAll('svg text')).some(t => t.textContent.includes(c))),
}))()"""
#: Left edges of the characters of the first text node under a selector: increasing when rendered in order.
EDGES = """((sel) => {
  const el = document.querySelector(sel);
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  const node = walker.nextNode(), out = [], r = document.createRange();
  for (let i = 0; i < node.length; i++) {
    if (node.data[i] === ' ') continue;
    r.setStart(node, i); r.setEnd(node, i + 1);
    out.push(r.getBoundingClientRect().left);
  }
  return out;
})"""


def _clean(page) -> None:
    page.drain(0.5)
    assert page.dialogs() == [] and page.errors() == []
    got = page.evaluate(INJECTED)
    assert got == {"xss": None, "img": 0, "handlers": 0, "raw": []}, got


def _in_order(page, selector: str) -> None:
    edges = page.evaluate(f"{EDGES}({json.dumps(selector)})")
    assert len(edges) > 4 and edges == sorted(edges), edges


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    return hostile_run(tmp_path_factory.mktemp("hostile") / "run")


def _hover(page, d: dict, name: str, in_order: bool = False) -> str:
    """Hover the first instance named ``name`` (zoomed onto it); the tooltip's first line (``in_order``: checked
    to render left to right)."""
    inst = d["inst"]
    i = next(k for k in range(len(inst["name"])) if d["names"][inst["name"][k]] == name)
    s, e, lane = inst["start"][i], inst["start"][i] + inst["dur"][i], inst["lane"][i]
    page.evaluate(f"Plotly.relayout('plot', {{'xaxis.range': [{s / 1e6!r}, {e / 1e6!r}]}}).then(() => true)")
    x, y = page.evaluate(f"expoTimeline.toClient({(s + e) / 2e6!r}, {lane})")
    page.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
    got = wait_for(page, "!document.getElementById('tip').hidden && document.querySelector('#tip .t').textContent")
    if in_order:
        _in_order(page, "#tip .t")
    page.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 1, "y": 1})
    wait_for(page, "document.getElementById('tip').hidden")
    return got


def test_timeline_shows_hostile_names_visible_in_order_and_cut(tmp_path, open_page, hostile):
    """GIVEN the hostile run's timeline (instances: the EVIL ops) WHEN hovered in Chromium THEN the RTL name's
    tooltip reads "EVIL AB\\u202eCDEF" with its characters left to right, the 1 MiB name's is its first 300
    characters and "… (+1,048,281 characters)", the thread's lane label shows its isolate as \\u2067, no script
    ran, and the page holds the 1 MiB name once (before: the override reversed "CDEF" and the tooltip held the
    whole megabyte)."""
    doc = timeline_document([hostile], op=OP)
    out = tmp_path / "timeline.html"
    out.write_text(doc.text)
    assert doc.text.count(HUGE[:200]) == 1 and len(doc.text) < len(HUGE) + 3_000_000
    d = page_data(doc.text)
    assert {RTL, SCRIPT, IMG, HUGE} <= set(d["names"])
    page = open_page(out)
    _clean(page)
    assert _hover(page, d, RTL, in_order=True) == "EVIL AB\\u202eCDEF"
    assert _hover(page, d, HUGE) == HUGE[:300] + "… (+1,048,281 characters)"
    assert _hover(page, d, SCRIPT) == SCRIPT and _hover(page, d, IMG) == IMG
    labels = page.evaluate("Array.from(document.querySelectorAll('#plot .ytick text')).map(t => t.textContent)")
    shown = THREAD.replace("\u2067", "\\u2067")
    assert any(shown[:40] in t for t in labels), labels
    _clean(page)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=300)


def test_report_and_its_verify_section_show_hostile_text_as_text(tmp_path, open_page, hostile):
    """GIVEN the hostile run with a verify.json whose verdict line holds the RTL and script names and whose checks
    hold fields of the wrong type (a string for a count, for min_p, a list for the accuracy) WHEN `expo-prof
    report --op ^EVIL` writes the page and Chromium loads it THEN exit 0 (before: a traceback on the wrong
    types), nothing is injected, no control or bidi character shows raw anywhere (before: the ESC name and the
    override raw in the rank table), and the verify line renders in order."""
    verify = {"schema_name": "expo-prof.verify", "schema": 1,
              "verdict": {"verdict": SCRIPT, "line": RTL + " " + IMG},
              "checks": {"greedy": {"status": IMG, "identical": "<b>x</b>", "compared": [1]},
                         "distribution": {"status": "ok", "tests": "many", "min_p": "tiny", "power": None},
                         "sanity": {"on": {"status": 5}}},
              "accuracy": {"status": "ok", "accuracy_off": "a", "accuracy_on": [], "ci_low": {}, "ci_high": None}}
    (hostile / "verify.json").write_text(json.dumps(verify))
    try:
        out = tmp_path / "report.html"
        proc = _cli("report", str(hostile), "--op", OP, "-o", str(out))
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert "\x1b" not in proc.stdout + proc.stderr and "\u202e" not in proc.stdout
        html = out.read_text()
        assert html.count(HUGE[:200]) == 1
        page = open_page(out)
        _clean(page)
        cell = page.evaluate("document.querySelector('#rank-tbl tbody tr').lastChild.textContent")
        assert "EVIL \\u001b[31mred\\u001b[0m ×396" in cell, cell
        sec = page.evaluate("document.getElementById('verify').innerText")
        assert SCRIPT in sec and "EVIL AB\\u202eCDEF" in sec and "? tests, smallest p ?" in sec
        _in_order(page, "#verify p")
        _clean(page)
    finally:
        (hostile / "verify.json").unlink()


def test_compare_page_shows_hostile_run_labels_as_text(tmp_path, chromium):
    """GIVEN A/B tables whose run labels are the script closer, the <img onerror>, the RTL name (a CSV) and the
    1 MiB name (a JSON table: over a CSV field's limit) WHEN `compare --format html` writes its page and Chromium
    loads it THEN no script runs, nothing is injected, the figures' hover texts hold the labels escaped with the
    override visible and the 1 MiB label cut at 200 characters (the page stays under 6 MB) (before: the override
    raw in the hover text, the megabyte label in every figure)."""
    a = tmp_path / "off.csv"
    with open(a, "w", newline="") as f:
        csv.writer(f).writerows([["run", "output_throughput"], [SCRIPT, 100.0], [IMG, 101.0], [RTL, 99.5]])
    b = tmp_path / "on.json"
    b.write_text(json.dumps([{"run": HUGE, "output_throughput": 104.0}, {"run": "b2", "output_throughput": 105.0},
                             {"run": "b3", "output_throughput": 103.5}]))
    out = tmp_path / "ab.html"
    proc = _cli("compare", str(a), str(b), "--format", "html", "-o", str(out))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert out.stat().st_size < 6_000_000 and HUGE[:1000] not in out.read_text()
    page = chromium.new_page()
    try:
        page.navigate(out.resolve().as_uri(), timeout=60)
        deadline = time.monotonic() + 60
        while not page.evaluate("document.readyState === 'complete' && document.querySelectorAll('.js-plotly-plot .main-svg').length > 0"):
            assert time.monotonic() < deadline, page.errors()
            time.sleep(0.05)
        _clean(page)
        texts = page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(g => g.data.flatMap(t => t.text || []))")
        assert "EVIL AB\\u202eCDEF" in texts
        assert html.escape(SCRIPT) in texts and html.escape(IMG) in texts, [t[:90] for t in texts]  # plotly: HTML
        assert HUGE[:200] + "… (+1,048,381 characters)" in texts
        assert not any(c in t for t in texts for c in RAW)
    finally:
        page.close()

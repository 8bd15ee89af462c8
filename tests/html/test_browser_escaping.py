"""Names from traces never become markup or script: a recorded trace with hostile span names."""

from __future__ import annotations

import json

import pytest

from html_helpers import page_data, wait_for  # type: ignore[import-not-found]
from make_run import EVIL, EVIL_THREAD  # type: ignore[import-not-found]

from expo_prof.export import export_document
from expo_prof.html.build import report_document, timeline_document
from expo_prof.pipeline import Options

EVIL_TITLE = '"><img src=x onerror=alert("xss-title")><script>alert("xss-title")</script>'
#: What a successful injection would leave behind.
NO_INJECTION = """(() => ({
  img: document.querySelectorAll('img').length,
  scripts: Array.from(document.scripts).map(s => s.id || (s.src ? 'src:' + s.src : 'inline')),
  handlers: Array.from(document.querySelectorAll('*')).filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
}))()"""


def assert_clean(page, inline: int = 3) -> None:
    page.drain(0.5)
    assert page.dialogs() == []
    assert page.errors() == []
    got = page.evaluate(NO_INJECTION)
    assert got["img"] == 0 and got["handlers"] == 0
    # Exactly ours: the data block, plotly.js, common.js, the page's script(s) (timeline: timeline_paint.js too).
    assert got["scripts"] == ["expo-data"] + ["inline"] * inline


def test_timeline_shows_hostile_names_as_text(tmp_path, open_page, evil_run):
    """GIVEN a recorded run whose spans are named '<script>…</script>' and "'><img src=x onerror=…>", used as the
    instances (--op xss), and a hostile --title ('"><img onerror=…><script>…') WHEN the timeline page loads THEN no
    dialog opens, no element or handler is injected, and the tooltip and heading show the names literally."""
    doc = timeline_document([evil_run], op="xss", title=EVIL_TITLE)
    out = tmp_path / "timeline.html"
    out.write_text(doc.text)
    d = page_data(doc.text)
    assert set(EVIL) <= set(d["names"])
    page = open_page(out)
    assert_clean(page, inline=4)
    assert page.evaluate("document.getElementById('title').textContent") == EVIL_TITLE
    assert page.evaluate("document.title") == EVIL_TITLE
    # A thread named like markup: plotly would render <br>/<b> in an axis label; the label shows it as text.
    labels = page.evaluate("Array.from(document.querySelectorAll('#plot .ytick text')).map(t => t.textContent)")
    assert any(f"({EVIL_THREAD})" in t for t in labels), labels
    assert page.evaluate("document.querySelectorAll('#plot .ytick b, #plot .ytick tspan[style*=bold]').length") == 0
    inst = d["inst"]
    for i in range(2):
        s, e, lane = inst["start"][i], inst["start"][i] + inst["dur"][i], inst["lane"][i]
        page.evaluate(f"Plotly.relayout('plot', {{'xaxis.range': [{s / 1e6!r}, {e / 1e6!r}]}}).then(() => true)")
        x, y = page.evaluate(f"expoTimeline.toClient({(s + e) / 2e6!r}, {lane})")
        page.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
        first = wait_for(page, "!document.getElementById('tip').hidden && document.querySelector('#tip .t').textContent")
        assert first == d["names"][inst["name"][i]] and first in EVIL
    assert_clean(page, inline=4)


def test_report_shows_hostile_names_as_text(tmp_path, open_page, evil_run):
    """GIVEN the same run WHEN its report (instances = the hostile spans) loads THEN the per-rank table shows the
    names as text and nothing is injected."""
    doc = report_document([evil_run], op="xss", title=EVIL_TITLE)
    out = tmp_path / "report.html"
    out.write_text(doc.text)
    page = open_page(out)
    assert_clean(page)
    names = page.evaluate("document.querySelector('#rank-tbl tbody tr').lastChild.textContent")
    assert all(n in names for n in EVIL)


@pytest.mark.slow
def test_export_keeps_hostile_names_as_json_strings(tmp_path, evil_run):
    """GIVEN the same run WHEN exported THEN the names survive as plain JSON strings (a viewer's concern to escape)."""
    doc = export_document([evil_run], options=Options.make(op="xss"))
    events = json.loads(b"".join(doc.chunks))["traceEvents"]
    names = {e["name"] for e in events} | {e.get("args", {}).get("name") for e in events}
    assert set(EVIL) <= names


@pytest.mark.slow
def test_data_block_cannot_be_closed_by_a_name(tmp_path, evil_run):
    """GIVEN hostile names WHEN a page is rendered THEN the raw HTML holds none of them outside the escaped JSON:
    no '</script' inside the data block, so the parser cannot leave it early."""
    html = timeline_document([evil_run], op="xss", title=EVIL_TITLE).text
    block = html.split('<script type="application/json" id="expo-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block
    for n in EVIL:
        assert n not in html

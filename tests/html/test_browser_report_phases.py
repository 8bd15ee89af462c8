"""A switchback run's per-step chart on the report page in a real headless Chromium (issue 39, item 8: per-step
lines break at block changes instead of joining across them).

GIVEN the committed real switchback run (traces/samples/tiny-cpu-switchback) WHEN its report page loads offline
THEN every line over step ids in the steps chart (plotly's own trace data) has a null point exactly between two
plotted steps whose phases in the overlay event log (read here with ``json``) differ — also across an off block
that has no row —, lies strictly between them, and has no other null but where the value is genuinely missing;
every point names its step's arm, a real hover says ``step N · on (overlay)``, and the phase band along the x axis
is the log's blocks in the timeline's colours. A run that is no switchback (traces/samples/tiny-cpu-off-on)
keeps its chart as before: no inserted point, no arm, no band.
"""

from __future__ import annotations

from html_helpers import SAMPLES, page_data  # type: ignore[import-not-found]
from test_report_phases import ARMS, breaks, log_blocks, log_phases, the_log  # type: ignore[import-not-found]

from expo_prof.html.build import report_document

#: The timeline's phase colours (timeline.js COL.phase): the band uses the same.
PHASE_COLOUR = {"off": "#cfcfcf", "on": "#f2cf5b", "native": "#d4a6c8"}
CHART = ("document.getElementById('steps-chart').data.map((t) => ({type: t.type, name: t.name, x: Array.from(t.x),"
         " y: Array.from(t.y), cd: t.customdata === undefined ? null : t.customdata, gaps: t.connectgaps === undefined"
         " ? null : t.connectgaps, hv: t.hovertemplate, y2: t.yaxis === 'y2'}))")
SHAPES = ("(document.getElementById('steps-chart').layout.shapes || []).map((s) => [s.x0, s.x1, s.fillcolor, s.yref,"
          " s.showlegend, s.name])")


def load(tmp_path, open_page, d):
    out = tmp_path / "report.html"
    doc = report_document([d])
    out.write_text(doc.text)
    return open_page(out, offline=True), page_data(doc.text)


def test_switchback_lines_break_at_every_phase_change(tmp_path, open_page):
    d = SAMPLES / "tiny-cpu-switchback"
    phase_of = log_phases(the_log(d))
    page, data = load(tmp_path, open_page, d)
    st = data["recordings"][0]["steps"]
    ids = st["step"]
    forward = dict(zip(ids, st["forward"]))
    traces = page.evaluate(CHART)
    lines = [t for t in traces if t["type"] == "scatter"]
    assert len(lines) == 1 and lines[0]["y2"]  # one rank: the forward line
    want_breaks = [breaks(phase_of, a, b) for a, b in zip(ids, ids[1:])]
    assert sum(want_breaks) >= 10
    for t in lines:
        # THEN the points at step ids are the steps, in order, each with its value (null only where not measured)
        real = [i for i, x in enumerate(t["x"]) if x in forward]
        assert [t["x"][i] for i in real] == ids
        assert [t["y"][i] for i in real] == [None if forward[s] is None else forward[s] / 1e6 for s in ids]
        # AND between two consecutive steps there is one null point (strictly between them) exactly where the log's
        # phase changes between them, and nothing else
        got = []
        for i, j in zip(real, real[1:]):
            inserted = list(range(i + 1, j))
            assert len(inserted) <= 1
            for k in inserted:
                assert t["y"][k] is None and t["x"][i] < t["x"][k] < t["x"][j]
            got.append(bool(inserted))
        assert got == want_breaks
        assert real[0] == 0 and real[-1] == len(t["x"]) - 1 and t["gaps"] is False
    # AND every point of every trace names its step's arm
    for t in traces:
        xs = [x for x in t["x"] if x in forward]
        cds = [c for x, c in zip(t["x"], t["cd"]) if x in forward]
        assert [c[0] for c in cds] == [" · " + ARMS[phase_of[s]] for s in xs]
        assert t["hv"].startswith("step %{x}%{customdata[0]}<br>")
    # AND a hover over step 12's forward point says its arm
    n = lines[0]["x"].index(12)
    curve = traces.index(lines[0])
    page.evaluate(f"Plotly.Fx.hover('steps-chart', [{{curveNumber: {curve}, pointNumber: {n}}}])")
    text = page.evaluate("document.querySelector('#steps-chart .hoverlayer').textContent")
    assert text.startswith("step 12 · on (overlay)"), text
    # AND the phase band is the log's blocks (off blocks too), coloured by phase, one legend entry per arm
    shapes = page.evaluate(SHAPES)
    assert [[x0 + 0.5, x1 - 0.5] for x0, x1, *_ in shapes] == [[f, la] for f, la, _ in log_blocks(phase_of)]
    assert [c for _, _, c, *_ in shapes] == [PHASE_COLOUR[p] for *_, p in log_blocks(phase_of)]
    assert {s[3] for s in shapes} == {"paper"}
    assert sorted(name for *_, shown, name in shapes if shown) == ["phase: " + ARMS["off"], "phase: " + ARMS["on"]]
    assert page.errors() == []


def test_chart_of_a_run_without_switchback_is_unchanged(tmp_path, open_page):
    d = SAMPLES / "tiny-cpu-off-on"
    page, data = load(tmp_path, open_page, d)
    st = data["recordings"][data["primary"]]["steps"]
    traces = page.evaluate(CHART)
    assert traces and all(t["x"] == sorted(st["step"]) for t in traces)  # no inserted point
    for t in traces:
        assert t["cd"] is None and t["gaps"] is None and t["hv"].startswith("step %{x}<br>")
        if t["type"] == "scatter":
            assert None not in t["y"]
    assert page.evaluate(SHAPES) == []
    assert page.errors() == []

"""A switchback run's timeline page in a real headless Chromium: the answer leads, the phase track is drawn
(issue 39, items 6 and 8).

GIVEN the committed real switchback run that decided as it went (traces/samples/tiny-cpu-sequential) WHEN its
timeline page loads THEN the header's first line under the title is the saving line every command prints (the
decision, the measured saving and its confidence sequence), the overlap lines after it say they are overlap, the
phase row is painted in each phase's colour and labelled with its arm, and hovering says which arm a block — and
a draw inside it — ran. A run that is no switchback keeps its header as before.
"""

from __future__ import annotations

from html_helpers import SAMPLES, page_data  # type: ignore[import-not-found]
from test_browser_timeline import build, check_drawn, hover, pixel_at, zoom_to  # type: ignore[import-not-found]

from expo_prof.pipeline import run

#: The page's phase colours (timeline.js COL.phase), by D.phases index: off, on, native.
PHASE_RGB = [(0xCF, 0xCF, 0xCF), (0xF2, 0xCF, 0x5B), (0xD4, 0xA6, 0xC8)]
#: The header's shown lines under the title, in order: "id|text".
HEADER_LINES = ("Array.from(document.querySelectorAll('header > div')).filter((e) => !e.hidden && e.textContent)"
                ".map((e) => e.id + '|' + e.textContent)")


def test_switchback_page_leads_with_the_answer_and_draws_phases(tmp_path, open_page):
    d = SAMPLES / "tiny-cpu-sequential"
    rr = run([d]).recordings[0]
    out, data = build(tmp_path, d)
    page = open_page(out, offline=True)
    check_drawn(page, data)
    # THEN the first line under the title is the answer, the overlap lines follow and say what they are
    lines = page.evaluate(HEADER_LINES)
    assert lines[0] == "answer|" + rr.saving_line and rr.saving_line.startswith("saving (switchback): keep off — costs")
    assert lines[1].startswith("summary|overlap, not saving — rank 0 (overlay-log): 679 instances")
    assert lines[2] == "headline|overlap, not saving — " + rr.headline
    assert page.evaluate("document.querySelector('header > h1').nextElementSibling.id") == "answer"
    # AND the phase row: the first 'on' block painted in the 'on' colour, labelled with its arm when it fits
    (row,) = [i for i, ln in enumerate(data["lanes"]) if ln["kind"] == "phase"]
    ph = data["phase"]
    k = list(ph["phase"]).index(1)
    s, e = ph["start"][k], ph["start"][k] + ph["dur"][k]
    zoom_to(page, s, e)
    assert pixel_at(page, (s + 0.9 * (e - s)) / 1e6, row) == PHASE_RGB[1]
    assert pixel_at(page, (s - 0.1 * (e - s)) / 1e6, row) == PHASE_RGB[0]  # the off block before it
    assert [k, "on (overlay)"] in page.evaluate("expoTimeline.stats.phaseLabels")
    # AND hovering the block says its arm and steps; a draw inside it says the arm it ran under
    tip = hover(page, (s + 0.9 * (e - s)) / 1e6, row)
    assert tip.splitlines()[0] == "on (overlay)" and f"steps {ph['first'][k]}–{ph['last'][k]} ({ph['n'][k]} steps)" in tip
    inst = data["inst"]
    j = next(i for i, t in enumerate(inst["start"]) if s <= t < e)
    zoom_to(page, inst["start"][j], inst["start"][j] + inst["dur"][j])
    tip = hover(page, (inst["start"][j] + inst["dur"][j] / 2) / 1e6, data["lanes"].index(
        next(ln for ln in data["lanes"] if ln["label"].endswith("overlay exponential"))))
    assert f"step {inst['step'][j]} · on (overlay)" in tip
    # AND the legend names both phases in one entry
    assert page.evaluate("document.querySelector('[data-layer=phase]').textContent") == \
        "switchback phase: off (engine as shipped)on (overlay)"
    assert page.errors() == []


def test_other_runs_keep_their_header(tmp_path, open_page):
    """GIVEN an overlay-on run that is no switchback WHEN its page loads THEN no answer line, no phase row, and
    the headline is the pipeline's headline and saving line, as before."""
    d = SAMPLES / "tiny-cpu-off-on" / "02-on"
    rr = run([d]).recordings[0]
    out, data = build(tmp_path, d)
    page = open_page(out, offline=True)
    assert page.errors() == []
    assert page.evaluate("document.getElementById('answer').hidden") is True
    assert page.evaluate("document.getElementById('headline').textContent") == f"{rr.headline} — {rr.saving_line}"
    assert not page.evaluate("document.querySelector('[data-layer=phase]')")
    assert page_data(out.read_text())["phase"]["start"] == []

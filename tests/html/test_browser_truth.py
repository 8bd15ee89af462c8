"""The timeline page tells the truth in pixels: hidden:exposed colour shares at every zoom, search, layout.

A generated CUDA trace shaped like issue 12's (tests/html/dense_trace.py: per step 99 forward kernels on
stream 7 and one exponential kernel on stream 20 cut into ~118 hidden/exposed pieces, 76 % hidden) is
drawn in a real headless Chromium and *screenshotted*: the share of green among the green and red
pixels of the instance lane must be the analysis' hidden share (±5 points).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from dense_trace import dense_cuda_timeline  # type: ignore[import-not-found]
from html_helpers import page_data, require, wait_for  # type: ignore[import-not-found]

from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.html.timeline_data import build_payload
from expo_prof.html.timeline_page import render

GREEN = np.array((44, 160, 44))
RED = np.array((214, 39, 40))
AMBER = (255, 159, 28)


@pytest.fixture(scope="module")
def dense_page(tmp_path_factory) -> tuple[Path, dict, float]:
    """The page of a 400-step dense trace (40k events, 47k pieces), its data and the analysis' hidden share."""
    a = analyze_timeline(dense_cuda_timeline(400))
    html = render(build_payload([a], title="dense"))
    out = tmp_path_factory.mktemp("dense") / "dense.html"
    out.write_text(html)
    return out, page_data(html), float(a.hidden.sum() / a.total.sum())


def lane_shares(page, tmp_path: Path, lane: int) -> tuple[float, int]:
    """Screenshot the viewport; green / (green + red) pixels in the band of ``lane`` (and their count)."""
    import importlib.util

    require(importlib.util.find_spec("PIL") is not None, "pillow (dev extra)")
    from PIL import Image

    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    shot = tmp_path / "shot.png"
    page.screenshot(shot)
    img = np.asarray(Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")).astype(int)
    y0, y1, x0, x1 = page.evaluate(
        f"(() => {{ const fl = document.getElementById('plot')._fullLayout, sz = fl._size, ya = fl.yaxis;"
        f" const r = document.getElementById('plot').getBoundingClientRect();"
        f" return [r.top + sz.t + ya.l2p({lane} - 0.5), r.top + sz.t + ya.l2p({lane} + 0.5), r.left + sz.l, r.left + sz.l + sz.w]; }})()"
    )
    band = img[int(round(min(y0, y1))):int(round(max(y0, y1))), int(round(x0)):int(round(x1))]
    # Plotly's SVG lies over the canvas (grid lines, the rank's light band): count near colours.
    g = int((np.abs(band - GREEN).sum(axis=2) <= 40).sum())
    r = int((np.abs(band - RED).sum(axis=2) <= 40).sum())
    assert g + r > 0, "no green or red pixel in the instance lane"
    return g / (g + r), g + r


def window_share(d: dict, s_ns: float, e_ns: float) -> float:
    """Hidden share of the instance pieces' time inside [s_ns, e_ns] (what the pixels there should show)."""
    ps = np.asarray(d["piece"]["start"], dtype=np.float64)
    pe = ps + np.asarray(d["piece"]["dur"], dtype=np.float64)
    cov = np.clip(np.minimum(pe, e_ns) - np.maximum(ps, s_ns), 0, None)
    hid = np.asarray(d["piece"]["hidden"]) > 0
    return float(cov[hid].sum() / cov.sum())


def test_instance_lane_pixels_show_the_hidden_share_whole_and_zoomed(tmp_path, open_page, dense_page):
    """GIVEN a 400-step trace whose draws are 76 % hidden, cut into ~118 pieces each
    WHEN the whole trace is on screen, and again zoomed to the middle tenth
    THEN the draw lane's green:red pixel ratio in a real screenshot is the hidden share (±5 points) both times,
    and zoomed into one step the pieces are drawn one by one (exact mode)."""
    html, d, share = dense_page
    page = open_page(html)
    assert page.errors() == []
    lane = next(i for i, ln in enumerate(d["lanes"]) if ln["label"].endswith("stream 20"))
    assert abs(share - 0.76) < 0.02
    got, n = lane_shares(page, tmp_path, lane)
    assert page.evaluate("expoTimeline.stats.bucketedLanes") >= 1  # dense: per-column proportions
    assert n > 10_000
    assert abs(got - share) <= 0.05, (got, share)
    # Middle zoom: 40 steps on screen, still ~5 pieces per pixel.
    span = d["span_ns"]
    s, e = 0.45 * span, 0.55 * span
    page.evaluate(f"Plotly.relayout('plot', {{'xaxis.range': [{s / 1e6!r}, {e / 1e6!r}]}}).then(() => true)")
    got, n = lane_shares(page, tmp_path, lane)
    assert page.evaluate("expoTimeline.stats.bucketedLanes") >= 1
    assert abs(got - window_share(d, s, e)) <= 0.05, (got, window_share(d, s, e))
    # One step: exact pieces; a long hidden piece's middle is green, the exposed tail red.
    i = len(d["inst"]["start"]) // 2
    st, du = d["inst"]["start"][i], d["inst"]["dur"][i]
    page.evaluate(f"Plotly.relayout('plot', {{'xaxis.range': [{(st + 0.9 * du) / 1e6!r}, {(st + 1.02 * du) / 1e6!r}]}}).then(() => true)")
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert page.evaluate("expoTimeline.stats.bucketedLanes") == 0
    pc = d["piece"]
    mine = [k for k in range(len(pc["inst"])) if pc["inst"][k] == i]
    tail = mine[-1]
    assert pc["hidden"][tail] == 0  # the draw ends exposed, past the forward
    x, y = page.evaluate(f"expoTimeline.toClient({(pc['start'][tail] + pc['dur'][tail] / 2) / 1e6!r}, {lane})")
    assert tuple(page.evaluate(f"expoTimeline.pixel({x}, {y})")[:3]) == tuple(RED)
    assert page.errors() == []


def test_search_highlights_and_jumps_between_matches(tmp_path, open_page, nccl_trace):
    """GIVEN the page of a real A100 trace WHEN a kernel name is typed in the search box
    THEN the page counts exactly the events of that name, 'next' zooms to the first and then the second
    match in time order, and the match is marked (amber strip) on screen."""
    from expo_prof.html.build import timeline_document

    doc = timeline_document([nccl_trace], op="nccl")
    out = tmp_path / "t.html"
    out.write_text(doc.text)
    d = page_data(doc.text)
    page = open_page(out)
    # a drawn work name with a handful of occurrences
    names = np.asarray(d["work"]["name"])
    ids, counts = np.unique(names, return_counts=True)
    nid = int(ids[np.flatnonzero((counts >= 3) & (counts <= 40))[0]])
    q = d["names"][nid]
    want = sum(1 for t in ("inst", "work", "fwd", "wait") for k in d[t]["name"] if q.lower() in d["names"][k].lower())
    page.evaluate(f"(() => {{ const s = document.getElementById('search'); s.value = {q!r};"
                  " s.dispatchEvent(new Event('input')); })()")
    assert wait_for(page, "expoTimeline.search.n") == want
    assert page.evaluate("document.getElementById('smsg').textContent").startswith(f"{want} match")
    ms = page.evaluate("expoTimeline.matches()")
    for k in (0, 1):
        page.evaluate("document.getElementById('snext').click()")
        wait_for(page, f"expoTimeline.search.cur === {k} && "
                       f"expoTimeline.stats.range[1] - expoTimeline.stats.range[0] < {d['span_ns'] / 1e6 / 2}")
        wait_for(page, f"Math.abs(expoTimeline.stats.range[0] - {ms[k][0]}) < {max(ms[k][1] - ms[k][0], 1e-3)} * 3")
        rng = page.evaluate("expoTimeline.stats.range")
        assert rng[0] <= ms[k][0] and ms[k][1] <= rng[1]
        assert page.evaluate("document.getElementById('smsg').textContent").startswith(f"{k + 1} of {want}:")
    # the strip along the top of the match's lane
    m = ms[1]
    x, y = page.evaluate(f"expoTimeline.toClient({(m[0] + m[1]) / 2!r}, {m[2]})")
    rowh = page.evaluate("Math.abs(document.getElementById('plot')._fullLayout.yaxis.l2p(1)"
                         " - document.getElementById('plot')._fullLayout.yaxis.l2p(0))")
    assert tuple(page.evaluate(f"expoTimeline.pixel({x}, {y - rowh / 2 + 2.5})")[:3]) == AMBER
    assert page.errors() == []


def test_one_legend_and_step_labels_never_overlap(tmp_path, open_page, dense_page):
    """GIVEN the dense page WHEN shown whole and at several zooms THEN plotly draws no legend of its own
    (the page's legend is the only one, and clicking an entry hides that layer), and no two step labels overlap
    while labels are thinned to fit (some shown when 40 steps are on screen)."""
    html, d, _ = dense_page
    page = open_page(html)
    assert page.evaluate("document.querySelectorAll('#plot .legend').length") == 0
    assert page.evaluate("document.querySelectorAll('.legend').length") == 1
    span = d["span_ns"] / 1e6
    seen = 0
    for frac in (1.0, 0.25, 0.1, 0.03, 0.01):
        lo, hi = 0.5 * span - frac * span / 2, 0.5 * span + frac * span / 2
        page.evaluate(f"Plotly.relayout('plot', {{'xaxis.range': [{lo!r}, {hi!r}]}}).then(() => true)")
        labels = sorted(page.evaluate("expoTimeline.stats.stepLabels"))
        assert all(b[0] >= a[1] for a, b in zip(labels, labels[1:])), labels
        seen += len(labels)
        if frac == 0.1:
            assert len(labels) >= 4  # 40 steps on screen: thinned, not dropped
    assert seen > 0
    # legend toggles a layer: the draw lane goes blank
    lane = next(i for i, ln in enumerate(d["lanes"]) if ln["label"].endswith("stream 20"))
    page.evaluate(f"Plotly.relayout('plot', {{'xaxis.range': [0, {span!r}]}}).then(() => true)")
    page.evaluate("document.querySelector('.legend [data-layer=hidden]').click();"
                  "document.querySelector('.legend [data-layer=exposed]').click()")
    got = page.evaluate(
        f"(() => {{ const c = document.getElementById('bars'), g = c.getContext('2d'), fl = document.getElementById('plot')._fullLayout;"
        f" const y = Math.round(fl._size.t + fl.yaxis.l2p({lane})); const a = g.getImageData(fl._size.l, y, fl._size.w, 1).data;"
        f" let n = 0; for (let i = 0; i < a.length; i += 4) if (a[i + 3]) n++; return n; }})()"
    )
    assert got == 0
    assert page.errors() == []


def test_small_page_is_small(tmp_path, vllm_cpu_trace):
    """GIVEN a small real trace WHEN its timeline page is written THEN it is well under the old ~5 MB
    (the pinned partial plotly.js bundle, 1.2 MB, not the full 4.8 MB)."""
    from expo_prof.html.build import timeline_document

    doc = timeline_document([vllm_cpu_trace])
    assert len(doc.text.encode()) < 2_500_000
    assert "plotly.js (basic - minified) v4.1.1" in doc.text


def test_report_tables_fit_or_scroll(tmp_path, open_page, vllm_cpu_trace):
    """GIVEN the report page of a real trace WHEN shown 900 px wide (narrower than its widest table)
    THEN the page itself never scrolls sideways: every table stays inside the viewport and scrolls in its own box."""
    from expo_prof.html.build import report_document

    out = tmp_path / "r.html"
    out.write_text(report_document([vllm_cpu_trace]).text)
    page = open_page(out)
    page.send("Emulation.setDeviceMetricsOverride", {"width": 900, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    tables = page.evaluate(
        "Array.from(document.querySelectorAll('table.grid')).map(t => [t.getBoundingClientRect().right, t.scrollWidth,"
        " t.clientWidth, getComputedStyle(t).overflowX])"
    )
    assert tables
    assert page.evaluate("document.documentElement.scrollWidth") <= 900
    for right, _sw, _cw, ov in tables:
        assert right <= 900 and ov == "auto"
    assert any(sw > cw for _, sw, cw, _ in tables)  # at least one needed its own scroll bar at this width
    assert page.errors() == []


def test_merged_busy_lane_shows_its_exact_busy_share(tmp_path, open_page):
    """GIVEN the dense trace drawn with budgets so small that the forward lane is merged and its 2 µs gaps closed
    (the merged intervals alone would look ~95 % busy) WHEN the whole trace is on screen
    THEN the lane's grey bars cover the lane's exact busy share of the time (±5 points), from the per-bin grid."""
    import importlib.util

    require(importlib.util.find_spec("PIL") is not None, "pillow (dev extra)")
    from PIL import Image

    from expo_prof.analysis import intervals as iv

    tl = dense_cuda_timeline(400)
    p = build_payload([analyze_timeline(tl)], detail_budget=0, busy_budget=2_000)
    lane = next(i for i, ln in enumerate(p["lanes"]) if ln["label"].endswith("stream 7"))
    assert p["lod"]["gap_closed_ns"] > 0 and p["busy_cover"]["lanes"] == [lane]
    out = tmp_path / "busy.html"
    out.write_text(render(p))
    page = open_page(out)
    m = tl.lane == 0
    u = iv.union(tl.start[m], tl.end[m])
    lo, hi = page.evaluate("expoTimeline.stats.range")
    t0 = int(tl.start.min())
    want = float(iv.coverage(u, np.array([t0 + int(lo * 1e6)]), np.array([t0 + int(hi * 1e6)]))[0]) / ((hi - lo) * 1e6)
    merged = float((np.asarray(p["busy"]["dur"])).sum()) / ((hi - lo) * 1e6)
    assert merged - want > 0.1  # the merged intervals alone would overstate it
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    shot = tmp_path / "busy.png"
    page.screenshot(shot)
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    y0, y1, x0, x1, h = page.evaluate(
        f"(() => {{ const fl = document.getElementById('plot')._fullLayout, sz = fl._size, ya = fl.yaxis;"
        f" const r = document.getElementById('plot').getBoundingClientRect(); const rh = Math.abs(ya.l2p(1) - ya.l2p(0));"
        f" return [r.top + sz.t + ya.l2p({lane} - 0.5), r.top + sz.t + ya.l2p({lane} + 0.5), r.left + sz.l, r.left + sz.l + sz.w,"
        f" Math.round(rh * 0.62)]; }})()"
    )
    band = img[int(round(min(y0, y1))):int(round(max(y0, y1))), int(round(x0)):int(round(x1))]
    grey = int((np.abs(band - np.array((184, 194, 204))).sum(axis=2) <= 30).sum())
    got = grey / (h * band.shape[1])
    assert abs(got - want) <= 0.05, (got, want, merged)
    assert page.errors() == []

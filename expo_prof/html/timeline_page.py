"""The timeline page: static markup around the data; ``static/timeline.js`` draws it."""

from __future__ import annotations

from expo_prof.html.assets import render_page
from expo_prof.html.escape import text
from expo_prof.html.timeline_data import encode_for_page

#: Our own markup only: every text that comes from a trace is set by the page's JavaScript via textContent.
BODY = """<header>
<h1 id="title">expo-prof timeline</h1>
<div class="verdict" id="answer" hidden></div>
<div class="sub" id="summary"></div>
<div class="sub" id="headline"></div>
<div class="controls">
  <label for="step">jump to step</label><input type="number" id="step" step="1">
  <select id="stepsrc" title="whose step numbers"></select>
  <button id="go" type="button">go</button>
  <button id="prev" type="button" title="previous step">&#9664; prev</button>
  <button id="next" type="button" title="next step">next &#9654;</button>
  <button id="reset" type="button">whole trace</button>
  <span class="note" id="stepmsg"></span>
</div>
<div class="controls">
  <label for="search">find</label><input type="search" id="search" placeholder="op / kernel name" size="28">
  <button id="sprev" type="button" title="previous match (shift+Enter)">&#9664;</button>
  <button id="snext" type="button" title="next match (Enter)">&#9654;</button>
  <span class="note" id="smsg"></span>
</div>
<div class="note" id="lod"></div>
<details id="warnings"></details>
</header>
<main>
<div id="plot"></div>
<div class="legend" id="legend">
  <span data-layer="hidden"><span class="sw" style="background:var(--hidden)"></span>{TARGET}, hidden part: ran while another lane of the same device computed</span>
  <span data-layer="exposed"><span class="sw" style="background:var(--exposed)"></span>{TARGET}, exposed part: nothing else computed, it lengthens the step</span>
  <span data-layer="fwd"><span class="sw" style="background:var(--fwd)"></span>forward pass</span>{WAIT}
  <span data-layer="step"><span class="sw" style="background:rgba(31,41,51,0.45);width:3px"></span>step boundary</span>
  <span data-layer="w0"><span class="sw" style="background:var(--k0)"></span>kernels / operators</span>
  <span data-layer="w1"><span class="sw" style="background:var(--k1)"></span>communication / copies</span>
  <span data-layer="w2"><span class="sw" style="background:var(--k2)"></span>annotations / runtime</span>
  <span data-layer="busy"><span class="sw" style="background:var(--busy)"></span>busy: other work merged (level of detail)</span>
  <span><span class="sw" style="background:#ff9f1c;height:4px"></span>search match</span>
</div>
<p class="note">Where a lane holds more than one item per few pixels, each pixel column shows what is in it: the bar's
height is the share of that column's time covered, split into hidden (green) and exposed (red) in proportion.
Zoomed in, every piece is drawn exactly. Drag to zoom, double-click to zoom out, shift-drag or the pan tool to pan,
the wheel zooms, the slider below the plot selects a range. Hover a bar for its name, lane, step, start, duration
and hidden/exposed split. Click a legend entry to hide that layer.</p>
<section><h2>Sources</h2><div class="note" id="sources"></div></section>
</main>
<div id="tip" hidden></div>"""


def render(payload: dict) -> str:
    """The complete timeline HTML document for a payload of :func:`expo_prof.html.timeline_data.build_payload`."""
    # The legend speaks of the target: the exponential draw, or the --op regex (escaped: it is user text).
    op = (payload.get("run") or {}).get("target")
    body = BODY.replace("{TARGET}", "exponential draw" if op is None else f"op matching {text(op)}").replace(
        "{WAIT}", '\n  <span data-layer="wait"><span class="sw" style="background:var(--wait)"></span>sampler waiting for q</span>' if op is None else "")
    return render_page(
        title=str(payload.get("title") or "expo-prof timeline"),
        body=body,
        data=encode_for_page(payload),
        scripts=["common.js", "timeline_paint.js", "timeline.js"],
        styles=["common.css"],
    )

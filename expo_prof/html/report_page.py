"""The report page: static markup around the data; ``static/report.js`` fills it in."""

from __future__ import annotations

from expo_prof.html.assets import render_page

#: Our own markup only: every text from a trace or a manifest is set by the page's JavaScript via textContent.
BODY = """<header>
<h1 id="title">expo-prof report</h1>
<div class="sub" id="sub"></div>
<details id="warnings"></details>
</header>
<main>
<section id="headline"><h2>Headline <span class="note" id="headline-run"></span></h2><div class="cards" id="cards"></div>
<p class="note" id="headline-note"></p></section>
<section id="ab"><h2>A/B: overlay off vs on</h2><div class="note" id="ab-sides"></div><div id="ab-table"></div><div id="ab-compare"></div></section>
<section id="per-step"><h2>Per step</h2>
<div class="controls"><label for="rank">rank</label><select id="rank"></select></div>
<h3 class="note" id="steps-note">time per step, split into hidden and exposed</h3>
<div id="steps-chart"></div>
<h3 class="note">distribution over steps (cumulative)</h3>
<div id="dist-chart"></div></section>
<section id="cluster"><h2>Across ranks</h2><p class="note" id="cluster-note"></p><div id="cluster-heatmap"></div></section>
<section id="ranks"><h2>Per rank</h2><div id="rank-table"></div></section>
<section id="runs"><h2>Recordings</h2><div id="run-list"></div></section>
</main>"""


def render(payload: dict) -> str:
    """The complete report HTML document for a payload of :func:`expo_prof.html.report_data.build_payload`."""
    return render_page(
        title=str(payload.get("title") or "expo-prof report"),
        body=BODY,
        data=payload,
        scripts=["common.js", "report.js"],
        styles=["common.css"],
    )

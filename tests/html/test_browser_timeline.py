"""The timeline page in a real headless Chromium: drawn lanes and instances, hover, offline, steps."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from html_helpers import page_data, require, wait_for  # type: ignore[import-not-found]

from expo_prof.html.build import timeline_document
from expo_prof.words import fmt_ns  # the pages' Expo.fmtNs prints what the one Python formatter prints

RED = (214, 39, 40)
GREEN = (44, 160, 44)


def build(tmp_path: Path, src: Path, op: str | None = None) -> tuple[Path, dict]:
    doc = timeline_document([src], op=op)
    out = tmp_path / "timeline.html"
    out.write_text(doc.text)
    return out, page_data(doc.text)


def check_drawn(page, data: dict) -> None:
    """No errors; one y label per lane; every instance and piece painted at full range."""
    assert page.errors() == [], page.errors()
    assert page.dialogs() == []
    labels = page.evaluate("Array.from(document.querySelectorAll('#plot .ytick text')).map(t => t.textContent)")
    want = [lb["label"] if len(lb["label"]) <= 56 else lb["label"][:55] + "…" for lb in data["lanes"]]
    assert labels == want
    stats = page.evaluate("expoTimeline.stats")
    assert stats["inst"] == len(data["inst"]["start"])
    assert stats["pieces"] == len(data["piece"]["start"])


def hover(page, xms: float, lane: int) -> str:
    """Move the real mouse (DevTools Input events) to (x ms, lane) and return the tooltip text."""
    x, y = page.evaluate(f"expoTimeline.toClient({xms!r}, {lane})")
    page.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
    return wait_for(page, "!document.getElementById('tip').hidden && document.getElementById('tip').innerText")


def zoom_to(page, s_ns: int, e_ns: int) -> None:
    w = max(e_ns - s_ns, 1000)
    page.evaluate(f"Plotly.relayout('plot', {{'xaxis.range': [{(s_ns - w) / 1e6!r}, {(e_ns + w) / 1e6!r}]}}).then(() => true)")
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def pixel_at(page, xms: float, lane: int) -> tuple[int, int, int]:
    x, y = page.evaluate(f"expoTimeline.toClient({xms!r}, {lane})")
    return tuple(page.evaluate(f"expoTimeline.pixel({x}, {y})")[:3])


def test_real_gpu_trace_hover_and_colours(tmp_path, open_page, nccl_trace):
    """GIVEN a page of a real A100 trace with NCCL kernels partly under compute (--op nccl)
    WHEN it loads in Chromium THEN every lane and instance is drawn without console errors;
    hovering the instance with the most exposed time shows its name, lane, step, exact start, duration and split;
    zoomed in, its exposed piece is painted red and a hidden piece green."""
    html, d = build(tmp_path, nccl_trace, op="nccl")
    page = open_page(html)
    check_drawn(page, d)
    inst = d["inst"]
    i = int(np.argmax(inst["exposed"]))
    s, dur, lane = inst["start"][i], inst["dur"][i], inst["lane"][i]
    zoom_to(page, s, s + dur)
    text = hover(page, (s + dur / 2) / 1e6, lane)
    lines = text.splitlines()
    assert lines[0] == d["names"][inst["name"][i]]
    assert f"lane: {d['lanes'][lane]['label']}" in text
    step = inst["step"][i]
    assert f"step {step if step >= 0 else '-'}" in text
    assert f"start: {s / 1e6:.6f} ms" in text  # exact to the nanosecond
    assert f"duration: {fmt_ns(dur)}" in text
    assert f"hidden: {fmt_ns(inst['hidden'][i])} ({100 * inst['hidden'][i] / dur:.1f}%)" in text
    assert f"exposed: {fmt_ns(inst['exposed'][i])} ({100 * inst['exposed'][i] / dur:.1f}%)" in text
    pc = d["piece"]
    mine = [k for k in range(len(pc["inst"])) if pc["inst"][k] == i]
    for want_hidden, colour in ((0, RED), (1, GREEN)):
        k = max((k for k in mine if pc["hidden"][k] == want_hidden), key=lambda k: pc["dur"][k])
        zoom_to(page, pc["start"][k], pc["start"][k] + pc["dur"][k])
        mid = (pc["start"][k] + pc["dur"][k] / 2) / 1e6
        assert pixel_at(page, mid, lane) == colour
    assert page.errors() == []


def test_real_vllm_cpu_trace_offline_and_jump_to_step(tmp_path, open_page, vllm_cpu_trace):
    """GIVEN a page of the real vLLM CPU trace WHEN it loads with the network emulated offline
    THEN it draws (no errors), made no request but the file itself, and 'jump to step' zooms to that step."""
    html, d = build(tmp_path, vllm_cpu_trace)
    page = open_page(html, offline=True)
    check_drawn(page, d)
    assert [u for u in page.requests() if not u.startswith("file://")] == []
    assert page.evaluate("performance.getEntriesByType('resource').length") == 0
    sid = sorted(set(d["step"]["id"]))[5]
    page.evaluate(f"document.getElementById('step').value = '{sid}'; document.getElementById('go').click()")
    k = d["step"]["id"].index(sid)
    s, e = d["step"]["start"][k], d["step"]["start"][k] + d["step"]["dur"][k]
    rng = wait_for(page, f"expoTimeline.stats.range[1] < {d['span_ns'] / 1e6 / 2} && expoTimeline.stats.range")
    assert rng[0] <= s / 1e6 and e / 1e6 <= rng[1] and rng[1] - rng[0] < 2 * (e - s) / 1e6
    assert page.evaluate("document.getElementById('stepmsg').textContent").startswith(f"step {sid}:")
    # The instances of that step are the ones painted now.
    inside = sum(1 for st in d["inst"]["step"] if st == sid)
    assert page.evaluate("expoTimeline.stats.inst") >= inside > 0


def test_recorded_run_page_matches_its_analysis(tmp_path, open_page, run_on):
    """GIVEN a recorded run (real torch profiler, the draw on a spare thread) WHEN its page loads
    THEN the header states the analysis' instance count and hidden share, and a hidden-heavy instance
    hovers with the analysis' numbers."""
    from expo_prof import readers
    from expo_prof.analysis import analyze

    html, d = build(tmp_path, run_on)
    page = open_page(html)
    check_drawn(page, d)
    res = analyze(readers.load([run_on]).timelines)
    summary = page.evaluate("document.getElementById('summary').textContent")
    assert f"{res.summary.instances} instances, hidden {100 * res.summary.hidden_fraction:.1f}%" in summary
    inst = d["inst"]
    i = int(np.argmax(inst["hidden"]))
    zoom_to(page, inst["start"][i], inst["start"][i] + inst["dur"][i])
    text = hover(page, (inst["start"][i] + inst["dur"][i] / 2) / 1e6, inst["lane"][i])
    assert f"hidden: {fmt_ns(inst['hidden'][i])}" in text and "expo_prof::exponential" in text


def _samples():
    from html_helpers import sample_runs  # type: ignore[import-not-found]

    runs = sample_runs()
    return runs or [None]


@pytest.mark.parametrize("run", _samples(), ids=lambda p: p.name if p else "no-samples")
def test_committed_sample_runs_open(tmp_path, open_page, run):
    """GIVEN each real run committed under traces/samples (vLLM recorded by expo-prof) WHEN its timeline page loads
    offline THEN it draws every lane and every instance the analysis found, without errors."""
    require(run is not None, "a recorded run under traces/samples/")
    from expo_prof.pipeline import run as pipeline_run

    html, d = build(tmp_path, run)
    page = open_page(html, offline=True)
    check_drawn(page, d)
    # the same instances `analyze` counts (one source per rank), not every source's
    assert len(d["inst"]["start"]) == pipeline_run([run]).document.summary.instances
    assert re.search(r"\d+ exponential instances drawn individually", page.evaluate("document.getElementById('lod').textContent"))


def test_sources_line_names_forward_by_its_source(tmp_path, open_page, nccl_trace, mixed_ranks_run):
    """GIVEN a real A100 trace without a forward span (--op nccl) and a real 2-rank run where only rank 0 has the
    expo_prof::forward span WHEN their timelines load THEN each rank's sources line names its forward figure:
    "compute busy (no forward span)" where there is no span, "forward (expo_prof::forward span)" where there is."""
    html, _ = build(tmp_path, nccl_trace, op="nccl")
    page = open_page(html)
    assert page.errors() == []
    lines = page.evaluate("Array.from(document.querySelectorAll('#sources div')).map(d => d.textContent)")
    assert len(lines) == 1 and " · compute busy (no forward span) · " in lines[0]
    html, _ = build(tmp_path, mixed_ranks_run)
    page = open_page(html)
    assert page.errors() == []
    lines = page.evaluate("Array.from(document.querySelectorAll('#sources div')).map(d => d.textContent)")
    assert [ln.split(" · ")[0] for ln in lines] == ["rank 0", "rank 1"]
    assert " · forward (expo_prof::forward span) · " in lines[0] and " · compute busy (no forward span) · " in lines[1]

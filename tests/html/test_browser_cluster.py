"""The report's ranks × steps heat map (cluster view) in a real headless Chromium."""

from __future__ import annotations

import pytest

from expo_prof.html.build import report_document
from expo_prof.pipeline import Options, run


def test_heatmap_holds_each_ranks_exposed_time_per_step(tmp_path, open_page, realtraces):
    """GIVEN a real two-rank torch_npu export analysed with --op MatMul WHEN its report loads offline THEN the
    heat map has one row per rank and one column per step, each cell the rank's exposed time in that step (µs),
    and the note states the slowest-rank bound; no error."""
    src = realtraces / "msinsight/test/data/pytorch/text/level1"
    doc = report_document([src], op="MatMul")
    out = tmp_path / "r.html"
    out.write_text(doc.text)
    page = open_page(out, offline=True)
    assert page.errors() == []
    data = page.evaluate("(() => { const g = document.getElementById('cluster-heatmap'); const t = g.data[0];"
                         " return [t.type, t.x, t.y, t.z]; })()")
    kind, xs, ys, z = data
    res = run([src], Options.make(op="MatMul")).document
    assert kind == "heatmap" and ys == ["rank 0", "rank 1"] and xs == [s.step for s in res.cluster[0].steps]
    for st in res.steps:
        assert z[ys.index(f"rank {st.rank}")][xs.index(st.step)] * 1e3 == pytest.approx(st.exposed_ns)
    note = page.evaluate("document.getElementById('cluster-note').textContent")
    assert "slowest rank" in note.lower()


def test_one_rank_has_no_heatmap(tmp_path, open_page, realtraces):
    """GIVEN one rank's trace WHEN its report loads THEN the across-ranks section is hidden."""
    doc = report_document([realtraces / "vllm-cpu" / "rank0-fp64-gumbel.pt.trace.json.gz"])
    out = tmp_path / "r.html"
    out.write_text(doc.text)
    page = open_page(out, offline=True)
    assert page.errors() == []
    assert page.evaluate("getComputedStyle(document.getElementById('cluster')).display") == "none"

"""The report's "saved per step" card in a real headless Chromium where no overlay can run (issue 32, item 2).

GIVEN the GENERATED / FAKE Model Runner V2 trace of tests/support/fused_sampling.py (real kernel names, figures
set by construction) and the real vLLM 0.32 CPU trace of the V1 fused Gumbel op
WHEN ``expo-prof report``'s page loads offline
THEN the card says "no switchback on this engine" (MRV2) or "not measured" (CPU V1, where switchback can run),
shows "≤" the sampling kernel's time on the critical path per step — the JSON's ``runs[].bound.critical_ns`` —
and the saving line below it, the one ``analyze`` prints. For vllm-ascend's Model Runner V2 categorical sampler
(GENERATED / FAKE trace, real kernel names; one uniform per row, no noise) the card says "none possible", 0, with
the line giving the sampling cost, and the tok/s card offers no upper bound.
"""

from __future__ import annotations

from pathlib import Path

from html_helpers import page_data  # type: ignore[import-not-found]

from expo_prof.html.build import report_document
from expo_prof.pipeline import run as pipeline_run
from expo_prof.words import fmt_ns  # the pages' Expo.fmtNs prints what the one Python formatter prints
from support.fused_sampling import ascend_v2_categorical_trace, mrv2_trace


def _page(tmp_path: Path, src: Path) -> tuple[Path, dict, dict]:
    result = pipeline_run([src])
    doc = report_document([src], result=result)
    out = tmp_path / "report.html"
    out.write_text(doc.text)
    entry = result.document.recordings[0]
    return out, page_data(doc.text), {"line": entry.saving_line, "bound": entry.bound}


def _card(page, card: str = "c-saving") -> tuple[str, str, str]:
    return tuple(page.evaluate(f"document.querySelector('#{card} .{c}').textContent") for c in ("k", "v", "d"))


def _loaded(tmp_path: Path, open_page, src: Path):
    """The report of ``src`` loaded offline with no page error: (page, its data, what the pipeline said)."""
    out, data, want = _page(tmp_path, src)
    page = open_page(out, offline=True)
    assert page.errors() == []
    return page, data, want


def test_mrv2_card_says_no_switchback_and_the_bound(tmp_path, open_page):
    # GIVEN the FAKE MRV2 trace (30 µs of _gumbel_sample_kernel exposed per 1 ms step)
    built = mrv2_trace(tmp_path / "mrv2")
    # WHEN the report loads offline
    page, _, want = _loaded(tmp_path, open_page, built.path)
    title, value, detail = _card(page)
    # THEN the card names the engine's limit, shows the bound as built, and the line analyze prints
    assert title == "saved per step — no switchback on this engine"
    assert value == "≤ " + fmt_ns(built.critical_ns) == "≤ " + fmt_ns(want["bound"].critical_ns)
    assert detail == want["line"] and "--overlay switchback" not in detail


def test_cpu_v1_fused_op_card_keeps_not_measured(tmp_path, open_page, realtraces):
    # GIVEN the real vLLM 0.32 CPU trace whose V1 sampler ran _C::fused_gumbel_argmax (switchback can run there)
    # WHEN the report loads offline
    page, data, want = _loaded(tmp_path, open_page, realtraces / "vllm-cpu" / "rank0-default-with-stack.pt.trace.json.gz")
    title, value, detail = _card(page)
    # THEN the saving is "not measured", bounded by the op's critical-path time, with the command that measures it
    assert title == "saved per step — not measured"
    assert value == "≤ " + fmt_ns(want["bound"].critical_ns)
    assert detail == want["line"] and "--overlay switchback" in detail
    assert data["recordings"][0]["bound"]["critical_ns"] == want["bound"].critical_ns


def test_categorical_card_says_none_possible_and_the_cost(tmp_path, open_page):
    # GIVEN the FAKE vllm-ascend Model Runner V2 trace (categorical_sample: 40 µs a 1 ms step on the critical path)
    built = ascend_v2_categorical_trace(tmp_path / "ascend")
    # WHEN the report loads offline
    page, _, want = _loaded(tmp_path, open_page, built.path)
    title, value, detail = _card(page)
    # THEN the saving card says none is possible, 0, and the line with the sampling cost — no "≤" bound
    assert title == "saved per step — none possible" and value == fmt_ns(0)
    assert detail == want["line"] and "sampling costs " + fmt_ns(built.critical_ns) + "/step" in detail
    assert "≤" not in value and want["bound"].noise is False
    # AND the tok/s card offers no upper bound, and says why, with the cost per step
    _, toks, why = _card(page, "c-toks")
    assert toks == "–" and "draws no noise over the vocabulary" in why and fmt_ns(built.critical_ns) in why

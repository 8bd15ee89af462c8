"""The report's "saved per step" card in a real headless Chromium where no overlay can run (issue 32, item 2).

GIVEN the GENERATED / FAKE Model Runner V2 trace of tests/support/fused_sampling.py (real kernel names, figures
set by construction) and the real vLLM 0.32 CPU trace of the V1 fused Gumbel op
WHEN ``expo-prof report``'s page loads offline
THEN the card says "no switchback on this engine" (MRV2) or "not measured" (CPU V1, where switchback can run),
shows "≤" the sampling kernel's time on the critical path per step — the JSON's ``runs[].bound.critical_ns`` —
and the saving line below it, the one ``analyze`` prints.
"""

from __future__ import annotations

from pathlib import Path

from html_helpers import page_data  # type: ignore[import-not-found]

from expo_prof.html.build import report_document
from expo_prof.pipeline import run as pipeline_run
from expo_prof.words import fmt_ns  # the pages' Expo.fmtNs prints what the one Python formatter prints
from support.fused_sampling import mrv2_trace


def _page(tmp_path: Path, src: Path) -> tuple[Path, dict, dict]:
    result = pipeline_run([src])
    doc = report_document([src], result=result)
    out = tmp_path / "report.html"
    out.write_text(doc.text)
    entry = result.document.runs[0]
    return out, page_data(doc.text), {"line": entry.saving_line, "bound": entry.bound}


def _card(page) -> tuple[str, str, str]:
    return tuple(page.evaluate(f"document.querySelector('#c-saving .{c}').textContent") for c in ("k", "v", "d"))


def test_mrv2_card_says_no_switchback_and_the_bound(tmp_path, open_page):
    # GIVEN the FAKE MRV2 trace (30 µs of _gumbel_sample_kernel exposed per 1 ms step)
    built = mrv2_trace(tmp_path / "mrv2")
    out, _, want = _page(tmp_path, built.path)
    # WHEN the report loads offline
    page = open_page(out, offline=True)
    assert page.errors() == []
    title, value, detail = _card(page)
    # THEN the card names the engine's limit, shows the bound as built, and the line analyze prints
    assert title == "saved per step — no switchback on this engine"
    assert value == "≤ " + fmt_ns(built.critical_ns) == "≤ " + fmt_ns(want["bound"].critical_ns)
    assert detail == want["line"] and "--overlay switchback" not in detail


def test_cpu_v1_fused_op_card_keeps_not_measured(tmp_path, open_page, realtraces):
    # GIVEN the real vLLM 0.32 CPU trace whose V1 sampler ran _C::fused_gumbel_argmax (switchback can run there)
    out, data, want = _page(tmp_path, realtraces / "vllm-cpu" / "rank0-default-with-stack.pt.trace.json.gz")
    # WHEN the report loads offline
    page = open_page(out, offline=True)
    assert page.errors() == []
    title, value, detail = _card(page)
    # THEN the saving is "not measured", bounded by the op's critical-path time, with the command that measures it
    assert title == "saved per step — not measured"
    assert value == "≤ " + fmt_ns(want["bound"].critical_ns)
    assert detail == want["line"] and "--overlay switchback" in detail
    assert data["runs"][0]["bound"]["critical_ns"] == want["bound"].critical_ns

"""The data of a report page: analysis results and manifests of one or more runs.

Headline figures (all from :class:`~expo_prof.analysis.model.AnalysisResult`
and the manifest's workload metrics; docs/html.md explains each):

* **hidden fraction** — hidden / total exponential time (``summary.hidden_fraction``);
* **exposed per step** — mean (p50, p99) of the steps' exposed exponential time;
* **forward per step** — mean forward-pass time of the steps;
* **step time** — mean length of the step windows;
* **estimated tok/s effect** — ``-exposed_per_step / step_time``: decode
  throughput is tokens per step over step time, and the exposed draw is time
  the step would not take if the draw were fully hidden, so this is the share
  of tokens per second the remaining exposed draw costs (first order, steps
  of equal size). With measured tok/s in the manifest the page also shows
  ``tok/s × step / (step − exposed)``: the throughput with the draw fully hidden.

With runs of both overlay settings an A/B section lists every metric per run
and side, with the difference of the means. It is data-driven (rows are
whatever metrics the runs share) and takes an optional ``compare`` object —
the statistics of ``expo-prof compare`` when that exists — rendered as given.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec

from expo_prof import __version__
from expo_prof.analysis.model import AnalysisResult

SCHEMA = 1

#: Workload metrics shown in the A/B section: (key, label, unit, better).
METRICS = (
    ("output_throughput", "output tok/s", "tok/s", "higher"),
    ("total_token_throughput", "total tok/s", "tok/s", "higher"),
    ("request_throughput", "requests/s", "req/s", "higher"),
    ("median_tpot_ms", "TPOT p50", "ms", "lower"),
    ("p99_tpot_ms", "TPOT p99", "ms", "lower"),
    ("median_itl_ms", "ITL p50", "ms", "lower"),
    ("p99_itl_ms", "ITL p99", "ms", "lower"),
    ("median_ttft_ms", "TTFT p50", "ms", "lower"),
    ("mean_e2el_ms", "E2E latency mean", "ms", "lower"),
    ("completed", "completed requests", "", "higher"),
    ("failed", "failed requests", "", "lower"),
)
#: Analysis figures shown in the A/B section: (key in headline, label, unit, better).
FIGURES = (
    ("hidden_fraction", "hidden fraction", "%", "higher"),
    ("exposed_per_step_ns", "exposed per step (mean)", "ns", "lower"),
    ("wait_per_step_ns", "sampler wait per step (mean)", "ns", "lower"),
    ("forward_per_step_ns", "forward per step (mean)", "ns", "lower"),
    ("step_ns", "step time (mean)", "ns", "lower"),
    ("instances", "exponential instances", "", ""),
    ("tok_s_effect", "estimated tok/s effect", "%", "higher"),
)


def to_builtins(obj: Any) -> Any:
    """Plain JSON-able data of a msgspec Struct, a dataclass, or builtins."""
    if obj is None:
        return None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return msgspec.to_builtins(dataclasses.asdict(obj))
    return msgspec.to_builtins(obj)


def headline(result: AnalysisResult | None, metrics: dict) -> dict:
    """The headline figures of one run (None where the data does not say)."""
    h: dict[str, Any] = {k: None for k, *_ in FIGURES}
    h.update(exposed_p50_ns=None, exposed_p99_ns=None, tok_s=None, tok_s_if_hidden=None, steps=0, ranks=0)
    tok = metrics.get("output_throughput")
    h["tok_s"] = float(tok) if isinstance(tok, (int, float)) and not isinstance(tok, bool) else None
    if result is None:
        return h
    s = result.summary
    steps = [st for st in result.steps if st.step is not None]
    ps = s.per_step
    h.update(
        hidden_fraction=s.hidden_fraction,
        instances=s.instances,
        steps=s.steps,
        ranks=s.ranks,
        exposed_per_step_ns=ps.exposed_ns.mean if ps.exposed_ns.n else None,
        exposed_p50_ns=ps.exposed_ns.p50 if ps.exposed_ns.n else None,
        exposed_p99_ns=ps.exposed_ns.p99 if ps.exposed_ns.n else None,
        forward_per_step_ns=ps.forward_ns.mean if ps.forward_ns.n else None,
        wait_per_step_ns=ps.wait_ns.mean if ps.wait_ns.n else None,
    )
    if steps:
        step_ns = sum(st.end_ns - st.start_ns for st in steps) / len(steps)
        h["step_ns"] = step_ns
        exp = h["exposed_per_step_ns"]
        if exp is not None and step_ns > 0:
            h["tok_s_effect"] = -exp / step_ns
            if h["tok_s"] is not None and step_ns > exp:
                h["tok_s_if_hidden"] = h["tok_s"] * step_ns / (step_ns - exp)
    return h


def step_columns(result: AnalysisResult | None) -> dict:
    """Per-step values column-wise (steps outside any step window are left out)."""
    cols: dict[str, list] = {k: [] for k in ("rank", "step", "instances", "total", "hidden", "exposed", "forward", "wait", "dur")}
    if result is None:
        return cols
    for st in result.steps:
        if st.step is None:
            continue
        cols["rank"].append(st.rank)
        cols["step"].append(st.step)
        cols["instances"].append(st.instances)
        cols["total"].append(st.total_ns)
        cols["hidden"].append(st.hidden_ns)
        cols["exposed"].append(st.exposed_ns)
        cols["forward"].append(st.forward_ns)
        cols["wait"].append(st.wait_ns)
        cols["dur"].append(st.end_ns - st.start_ns)
    return cols


def run_entry(label: str, path: str, overlay: str | None, manifest: dict | None, result: AnalysisResult | None, error: str | None) -> dict:
    """One run of the report."""
    metrics = (manifest or {}).get("metrics") or {}
    if not isinstance(metrics, dict):
        metrics = {}
    return {
        "label": label,
        "path": path,
        "overlay": overlay,
        "manifest": manifest,
        "metrics": metrics,
        "analysis": to_builtins(result),
        "error": error,
        "headline": headline(result, metrics),
        "steps": step_columns(result),
    }


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def ab_section(runs: list[dict], compare: Any = None) -> dict | None:
    """Side-by-side figures of the overlay-off and overlay-on runs; None without both sides."""
    sides = {"off": [r for r in runs if r["overlay"] == "off"], "on": [r for r in runs if r["overlay"] == "on"]}
    if not sides["off"] or not sides["on"]:
        return None
    rows = []

    def add(key: str, label: str, unit: str, better: str, get) -> None:
        vals = {side: [get(r) for r in rs] for side, rs in sides.items()}
        nums = {side: [v for v in vs if isinstance(v, (int, float)) and not isinstance(v, bool)] for side, vs in vals.items()}
        if not nums["off"] and not nums["on"]:
            return
        m_off, m_on = _mean(nums["off"]), _mean(nums["on"])
        delta = m_on - m_off if m_off is not None and m_on is not None else None
        rel = delta / abs(m_off) if delta is not None and m_off else None
        rows.append({"key": key, "label": label, "unit": unit, "better": better, "off": vals["off"], "on": vals["on"],
                     "mean_off": m_off, "mean_on": m_on, "delta": delta, "rel": rel})

    for key, label, unit, better in METRICS:
        add(key, label, unit, better, lambda r, key=key: r["metrics"].get(key))
    for key, label, unit, better in FIGURES:
        add(key, label, unit, better, lambda r, key=key: r["headline"].get(key))
    return {
        "sides": {side: [r["label"] for r in rs] for side, rs in sides.items()},
        "rows": rows,
        "compare": to_builtins(compare),
    }


def build_payload(runs: list[dict], *, title: str = "expo-prof report", warnings: list[str] | None = None, compare: Any = None) -> dict:
    """The report page's data: the runs, which one the headline shows, and the A/B section."""
    primary = next((i for i, r in enumerate(runs) if r["overlay"] == "on" and r["analysis"]), None)
    if primary is None:
        primary = next((i for i, r in enumerate(runs) if r["analysis"]), 0)
    return {
        "schema": SCHEMA,
        "kind": "report",
        "title": title,
        "tool": f"expo-prof {__version__}",
        "runs": runs,
        "primary": primary,
        "ab": ab_section(runs, compare),
        "warnings": list(warnings or []),
    }

"""The data of a report page: per recording, the pipeline's analysis and the run's manifest.

Headline figures (all from :class:`~expo_prof.analysis.model.AnalysisResult`
and the manifest's workload metrics; docs/html.md explains each):

* **hidden fraction** — hidden / total time of the target (``summary.hidden_fraction``);
* **exposed per step** — mean (p50, p99) of the steps' exposed time; with several ranks the mean
  of ranks per step and the slowest rank's (the cluster view, analysis/cluster.py): ranks run a
  step in parallel, so their per-step times are never summed — the cards and the per-step chart
  show the same two series;
* **sampler wait per step** — the sampler's wait for ``q`` (overlay on), named by its source (``wait_source``:
  the trace's span or the overlay log's window, docs/glossary.md): time the overlay itself puts on the critical
  path; "–" when not measured;
* **on the critical path per step** — the exposed draw and the sampler's wait, time in both counted once
  (``per_step.critical_ns``): what the draw still costs a step;
* **saved per step** — what the overlay saves, measured by switchback in the run itself (verdict, CI,
  the output tok/s it implies), or "not measured" with the command that measures it: overlap is not saving;
  where the draws are a fused sampling kernel (MRV2, FlashInfer, vLLM CPU's fused ops: ``bound``), "≤" its
  time on the critical path per step — the most any async draw could save — titled "no switchback on this
  engine" where no overlay can run there; where that kernel draws no noise over the vocabulary
  (vllm-ascend's categorical_sample: ``bound.noise`` false), "none possible", 0, its time a sampling cost;
* **forward per step** — mean forward-pass time of the steps, labelled by its source
  (``forward_source``: a forward span, or the compute lanes' busy time where the trace has none);
* **own time** — mean of the steps' own time (``steps[].own_ns``: start to the end of the step's last part),
  else of their windows (analysis/steps/means.py); the **step** card gives its p50, the cadence, the critical
  path's share of it, prefill and decode steps apart, the batch and q's shape and dtype
  (``summary.step_breakdown``), and what the source cannot give;
* **tok/s upper bound** — ``critical_share`` = ``(exposed ∪ wait) / own time`` (the critical path, time in both
  counted once): the most decode
  throughput could gain if that time left the step entirely (first order,
  steps of equal size). It is an *upper bound*: it ignores what overlapping
  costs the forward pass, which only an off/on pair measures — the A/B section.
  None (the card's "–") where the sampler draws no noise over the vocabulary: no draw to hide, no gain.

With runs of both overlay settings the A/B section *is* ``expo-prof compare``'s
result on those runs (the same function, the same numbers): per metric the
change, its 95 % CI, p, outcome; the verdict; warm-up/outlier flags; and the
mechanism (exponential time removed per step against the forward-pass slowdown).
With ``--op`` the page speaks of the op: no exponential, sampler or tok/s figure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from expo_prof.analysis.bound import sampling_bound
from expo_prof.analysis.saving.words import page_words
from expo_prof.analysis.steps.means import mean_own_ns

from expo_prof.analysis.model import SamplingBound
from expo_prof.analysis.cluster import cluster_view, per_step_means
from expo_prof.analysis.model import AnalysisResult, ClusterView
from expo_prof.html.names import budget_names
from expo_prof.html.timeline_data import PHASES, arm_label, step_phases
from expo_prof.timeline import Timeline
from expo_prof.version import __version__
from expo_prof.words import forward_label, forward_sources_by_rank

SCHEMA = 3

#: Headline figures: (key in headline, label, unit).
FIGURES = (
    ("hidden_fraction", "hidden fraction", "%"),
    ("exposed_per_step_ns", "exposed per step (mean)", "ns"),
    ("wait_per_step_ns", "sampler wait per step (mean, by wait_source)", "ns"),
    ("critical_per_step_ns", "on the critical path per step (exposed ∪ wait)", "ns"),
    ("forward_per_step_ns", "forward per step (mean)", "ns"),
    ("own_ns", "own time (mean)", "ns"),
    ("instances", "instances", ""),
    ("critical_share", "tok/s upper bound: critical path ÷ own time", "%"),
)


def to_builtins(obj: Any) -> Any:
    """Plain JSON-able data of a msgspec Struct, a dataclass, or builtins."""
    if obj is None:
        return None
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return msgspec.to_builtins(dataclasses.asdict(obj))
    return msgspec.to_builtins(obj)


def headline(result: AnalysisResult | None, metrics: dict, op: str | None = None,
             view: ClusterView | None = None, bound: SamplingBound | None = None) -> dict:
    """The headline figures of one recording (None where the data does not say; see the module docstring).

    ``view``: the recording's cluster view (several ranks): the per-step figures are then the mean of ranks
    (and the slowest rank's) averaged over the steps — the per-step chart's series, so cards and chart agree.
    ``bound``: the recording's :func:`sampling_bound`; one without noise has no tok/s to gain."""
    h: dict[str, Any] = {k: None for k, *_ in FIGURES}
    h.update(exposed_p50_ns=None, exposed_p99_ns=None, tok_s=None, rank_steps=0, ranks=0, wait_source=None,
             line=None, step_breakdown=None, exposed_slowest_per_step_ns=None, forward_slowest_per_step_ns=None,
             across_ranks=False)
    tok = metrics.get("output_throughput")
    h["tok_s"] = float(tok) if isinstance(tok, (int, float)) and not isinstance(tok, bool) else None
    if result is None or result.summary is None:
        return h
    from expo_prof.pipeline.result import headline as one_line

    s = result.summary
    steps = [st for st in result.steps if st.step is not None]
    ps = s.per_step
    h.update(
        line=one_line(s),
        hidden_fraction=s.hidden_fraction,
        instances=s.instances,
        rank_steps=s.rank_steps,
        wait_source=s.wait_source,
        ranks=s.ranks,
        exposed_per_step_ns=ps.exposed_ns.mean if ps.exposed_ns.n else None,
        exposed_p50_ns=ps.exposed_ns.p50 if ps.exposed_ns.n else None,
        exposed_p99_ns=ps.exposed_ns.p99 if ps.exposed_ns.n else None,
        forward_per_step_ns=ps.forward_ns.mean if ps.forward_ns is not None and ps.forward_ns.n else None,
        wait_per_step_ns=ps.wait_ns.mean if ps.wait_ns is not None and ps.wait_ns.n else None,
        # The step itself (analysis/steps/): the "step" card — own time, cadence, critical share, batch, q.
        step_breakdown=to_builtins(s.step_breakdown),
    )
    if view is not None:
        # Several ranks: mean of ranks per step (and the slowest rank), never the (rank, step) rows pooled.
        m = per_step_means(view)
        mean_exp = sorted(st.mean_exposed_ns for st in view.steps if st.mean_exposed_ns is not None)
        h.update(
            across_ranks=True,
            exposed_per_step_ns=m["exposed_mean"],
            exposed_p50_ns=_percentile(mean_exp, 50),
            exposed_p99_ns=_percentile(mean_exp, 99),
            exposed_slowest_per_step_ns=m["exposed_max"],
            forward_per_step_ns=m["forward_mean"],
            forward_slowest_per_step_ns=m["forward_max"],
            wait_per_step_ns=m["wait_mean"],
        )
    if op is not None:
        h["wait_per_step_ns"] = None  # the sampler's wait belongs to the exponential draw, not to another op
        h["tok_s"] = None
    exp = h["exposed_per_step_ns"]
    if exp is not None and s.rank_steps:
        # The critical path per step (docs/glossary.md): Totals.critical_ns's mean over the steps; with --op the
        # op's exposed time (no sampler waits for another op).
        h["critical_per_step_ns"] = ps.critical_ns.mean if ps.critical_ns is not None and op is None else exp
    own_ns = mean_own_ns(steps)  # the one mean own time the saving line's bound divides by (analysis/steps/means.py)
    if own_ns is not None:
        h["own_ns"] = own_ns
        crit = h["critical_per_step_ns"]
        # A sampler without noise (bound.noise false) has no draw whose leaving the step could speed it up.
        gain = op is None and (bound is None or bound.noise)
        if gain and crit is not None and own_ns > 0:
            h["critical_share"] = crit / own_ns
    return h


def _percentile(sorted_values: list[float], p: float) -> float | None:
    """The nearest-rank percentile of sorted values (the rule of ``Dist``'s p50/p99); None for none."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(p / 100.0 * len(sorted_values)) - 1)]


def forward_info(result: AnalysisResult | None) -> dict:
    """How the page names forward: the recording's label (its source, docs/json-output.md), each rank's, and the
    per-rank sources in words when they differ (a mix is said, not hidden)."""
    if result is None or result.summary is None:
        return {"label": forward_label(None), "by_rank": {}, "mixed": None}
    by_rank = {str(r.rank): forward_label(r.forward_source) for r in result.ranks}
    mixed = len({r.forward_source for r in result.ranks}) > 1
    return {"label": forward_label(result.summary.forward_source), "by_rank": by_rank,
            "mixed": forward_sources_by_rank((r.rank, r.forward_source) for r in result.ranks) if mixed else None}


def across_ranks(view: ClusterView | None) -> dict | None:
    """Per step across the ranks, column-wise (the cluster view's): the mean of ranks and the slowest rank —
    what the per-step chart draws for "all ranks"; None with fewer than two ranks."""
    if view is None:
        return None
    st = view.steps
    return {
        "step": [s.step for s in st],
        "ranks": [s.ranks for s in st],
        "hidden_mean": [s.mean_hidden_ns for s in st],
        "exposed_mean": [s.mean_exposed_ns for s in st],
        "exposed_max": [s.max_exposed_ns for s in st],
        "exposed_slowest": [s.slowest_rank for s in st],
        "forward_mean": [s.mean_forward_ns for s in st],  # null: no rank measured it
        "forward_max": [s.max_forward_ns for s in st],
        "forward_slowest": [s.slowest_forward_rank for s in st],
    }


def step_columns(result: AnalysisResult | None, timelines: Sequence[Timeline] = ()) -> dict:
    """Per-step values column-wise (steps outside any step window are left out).

    A switchback run (``timelines`` holds its overlay event log, ``RecordingResult.timelines``) adds each row's
    phase (:func:`step_phases`): ``phase`` (an index into ``phases``; null for a step in no block), ``phase_run``
    (the index of its run of consecutive log steps in one phase, per log: the per-step lines break where it
    changes, also across a block that has no row, such as an off block without draws), ``arms`` (each phase's
    arm, :func:`arm_label`) and ``phase_blocks`` ([rank, first step, last step, phase] per run, off blocks
    included: the chart's phase band). All five are null for any other run, and for rows counted from a source
    other than the log (a profiler trace numbers its steps its own way)."""
    cols: dict[str, Any] = {k: [] for k in ("rank", "step", "instances", "total", "hidden", "exposed", "forward", "wait", "dur")}
    cols.update(phase=None, phase_run=None, phases=None, arms=None, phase_blocks=None)
    if result is None:
        return cols
    rows = [st for st in result.steps if st.step is not None]
    for st in rows:
        cols["rank"].append(st.rank)
        cols["step"].append(st.step)
        cols["instances"].append(st.instances)
        cols["total"].append(st.total_ns)
        cols["hidden"].append(st.hidden_ns)
        cols["exposed"].append(st.exposed_ns)
        cols["forward"].append(st.forward_ns)  # null: not measured
        cols["wait"].append(st.wait_ns)
        cols["dur"].append(st.end_ns - st.start_ns)
    found = _phases_by_source(timelines)
    if found:
        seen = {p for by, _ in found.values() for p, _ in by.values()}
        names = [p for p in PHASES if p in seen]
        n_arms = max(n for _, n in found.values())
        at = {p: i for i, p in enumerate(names)}
        phase: list[int | None] = []
        run: list[int | None] = []
        for st in rows:
            log = found.get((st.source, st.rank))
            got = log[0].get(st.step) if log is not None and st.step is not None else None
            phase.append(None if got is None or got[0] is None else at[got[0]])
            run.append(None if got is None else got[1])
        if any(p is not None for p in phase):
            blocks = [[rank, first, last, at[p]] for (_, rank), (by, _) in sorted(found.items(), key=lambda kv: kv[0][1])
                      for first, last, p in _runs(by)]
            cols.update(phase=phase, phase_run=run, phases=names, arms=[arm_label(p, n_arms) for p in names],
                        phase_blocks=blocks)
    return cols


def _phases_by_source(timelines: Sequence[Timeline]) -> dict[tuple[str, int], tuple[dict[int, tuple[str | None, int]], int]]:
    """{(source, rank): ({step id: (phase or None, run index)}, arms)} of each switchback overlay log among
    ``timelines``; a run is a stretch of consecutive log steps (in step order) in one phase (steps in no block
    make runs of their own, phase None)."""
    out = {}
    for tl in timelines:
        found = step_phases(tl)
        if found is None:
            continue
        ids, phase, n_arms = found
        order = np.argsort(ids, kind="stable")
        by: dict[int, tuple[str | None, int]] = {}
        run, prev = -1, object()
        for i in order.tolist():
            p = phase[i]
            if run < 0 or p != prev:
                run += 1
            prev = p
            by[int(ids[i])] = (None if p is None else str(p), run)
        out[(tl.source, tl.rank)] = (by, n_arms)
    return out


def _runs(by: dict[int, tuple[str | None, int]]) -> list[tuple[int, int, str]]:
    """(first step, last step, phase) of each run of one log's steps that is in a block."""
    spans: dict[int, list] = {}
    for sid, (p, rn) in by.items():
        if p is None:
            continue
        s = spans.setdefault(rn, [sid, sid, p])
        s[0], s[1] = min(s[0], sid), max(s[1], sid)
    return [(a, b, p) for _, (a, b, p) in sorted(spans.items())]


def rank_step_grid(result: AnalysisResult | None, view: ClusterView | None) -> dict | None:
    """The ranks × steps heat map of one recording: exposed ns per (rank, step) (null where a rank lacks the
    step), with the cluster view's stragglers; None for fewer than two ranks (analysis/cluster.py)."""
    if result is None or view is None:
        return None
    steps = [s.step for s in view.steps]
    col = {sid: j for j, sid in enumerate(steps)}
    row = {r: i for i, r in enumerate(view.ranks)}
    grid: list[list[int | None]] = [[None] * len(steps) for _ in view.ranks]
    for st in result.steps:
        if st.step is None or st.rank not in row or st.step not in col:
            continue
        i, j = row[st.rank], col[st.step]
        grid[i][j] = (grid[i][j] or 0) + st.exposed_ns
    flagged = [[r, s.step] for s in view.steps for r in s.stragglers]
    return {"ranks": view.ranks, "steps": steps, "exposed": grid, "stragglers": flagged, "straggler_rule": view.straggler_rule,
            "slowest_ns": view.exposed_slowest_ns, "mean_ns": view.exposed_mean_ns, "skew_p50_ns": view.skew_p50_ns}


def run_entry(label: str, path: str, overlay: str | None, manifest: dict | None, result: AnalysisResult | None,
              error: str | None, op: str | None = None, saving_line: str = "", saving: Any = (),
              natural: Any = (), timelines: Sequence[Timeline] = ()) -> dict:
    """One recording of the report (``saving_line``, ``saving``, ``natural``: what the overlay saves, the
    pipeline's RecordingResult figures; ``timelines``: the recording's Timelines, ``RecordingResult.timelines``,
    whose switchback overlay log gives each step its phase — :func:`step_columns`)."""
    from expo_prof.pipeline.result import saving_line as line_of

    metrics = (manifest or {}).get("metrics") or {}
    if not isinstance(metrics, dict):
        metrics = {}
    view = cluster_view(result.steps) if result is not None else None
    # A fused sampling kernel's bound (what the "saved per step" card shows where nothing measured the saving);
    # an AnalysisResult rendered alone gets the line every command prints for it.
    bound = sampling_bound(result) if op is None else None
    if not saving_line and result is not None and op is None:
        saving_line = line_of(list(saving), None, bound)
    analysis, names_note = _names_shown(to_builtins(result), label)
    return {
        "label": label,
        "path": path,
        "overlay": overlay,
        "manifest": manifest,
        "metrics": metrics,
        "analysis": analysis,
        "names_note": names_note,
        "error": error,
        "headline": headline(result, metrics, op, view, bound),
        "forward": forward_info(result),
        "saving_line": saving_line,
        "savings": [to_builtins(x) for x in saving],
        # What the saving card prints, in the words every output uses (analysis/saving/words.py): the page
        # formats no figure of a saving itself.
        "saving_words": [page_words(x) for x in saving],
        "natural": [to_builtins(x) for x in natural],
        "bound": to_builtins(bound),
        "steps": step_columns(result, timelines),
        "across": across_ranks(view),
        "grid": rank_step_grid(result, view),
    }


#: Names per rank the page keeps (most frequent first; it shows two): a trace of all-different names would
#: otherwise put every one of them in the page.
NAMES_KEPT = 20


def _names_shown(analysis: dict | None, label: str) -> tuple[dict | None, str | None]:
    """``analysis`` with each rank's ``names`` cut to the :data:`NAMES_KEPT` most frequent (``names_more``: how
    many others) and long names within the page's budget (expo_prof.html.names); the note that says what was cut."""
    if not analysis:
        return analysis, None
    ranks = analysis.get("ranks") or []
    kept = []
    for r in ranks:
        items = sorted((r.get("names") or {}).items(), key=lambda kv: -kv[1])
        r["names_more"] = max(len(items) - NAMES_KEPT, 0)
        kept.append(items[:NAMES_KEPT])
    cut_names, note = budget_names([n for items in kept for n, _ in items], f"report ({label})")
    at = 0
    for r, items in zip(ranks, kept):
        shown: dict[str, int] = {}
        for name, (_, count) in zip(cut_names[at:at + len(items)], items):
            while name in shown:  # two names cut alike stay two entries
                name += " ·"
            shown[name] = count
        r["names"] = shown
        at += len(items)
    return analysis, note


def ab_section(compare: Any) -> dict | None:
    """The A/B section: compare's result as the page shows it (rows per metric, verdict, flags, mechanism)."""
    if compare is None:
        return None
    c = to_builtins(compare)
    rows = []
    for m in c["metrics"]:
        rows.append({"key": m["name"], "label": m["label"], "unit": m["unit"], "better": m["better"],
                     "off": m["a"]["values"], "on": m["b"]["values"], "mean_off": m["a"]["mean"],
                     "mean_on": m["b"]["mean"], "change_pct": m["change_pct"], "ci_pct": m["ci_pct"],
                     "p": (m["t_test"] or {}).get("p"), "outcome": m["outcome"], "notes": m["notes"],
                     # Unlike sides: no change, only why (compare's not_compared).
                     "not_compared": m.get("not_compared")})
    return {"sides": {"off": c["a"]["runs"], "on": c["b"]["runs"]}, "design": c["design"], "rows": rows,
            "verdict": c["verdict"], "flags": c["flags"],
            # the statement without its leading "decision:" (Verdict.reason): what the page prints after it
            "verdict_reason": compare.verdict.reason, "mechanism": c["mechanism"], "compare": c}


def build_payload(runs: list[dict], *, title: str = "expo-prof report", warnings: list[str] | None = None,
                  compare: Any = None, op: str | None = None) -> dict:
    """The report page's data: the recordings, which one the headline shows, and the A/B section."""
    primary = next((i for i, r in enumerate(runs) if r["overlay"] == "on" and r["analysis"]), None)
    if primary is None:
        primary = next((i for i, r in enumerate(runs) if r["analysis"]), 0)
    return {
        "schema": SCHEMA,
        "kind": "report",
        "title": title,
        "tool": f"expo-prof {__version__}",
        #: The target: null for the exponential draw, else the --op regex (the page words itself after it).
        "op": op,
        "recordings": runs,
        "primary": primary,
        "ab": ab_section(compare),
        "warnings": list(warnings or []) + [r["names_note"] for r in runs if r.get("names_note")],
    }

"""The step's id and window (pure functions): which step each event belongs to.

One of the modules that own every step quantity (docs/glossary.md): here the **step id** and the **window**;
:mod:`expo_prof.analysis.steps.facts` has each step's **own time**, its **cadence**, batch and q, and
:mod:`expo_prof.analysis.steps.means` their means over a set of steps.

Step ids come, in order of preference, from the reader's per-event step column (Ascend ``Step Id``, the overlay
event log's counter), ``ProfilerStep#N`` markers (N), or vLLM's ``execute_context_…`` annotations (numbered in
order). A step's window is ``[start, max(end, next start))``: the annotation covers ``execute_model`` only and the
sampler runs just after it, so the window stretches to the next step's start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from expo_prof.analysis import intervals as iv
from expo_prof.analysis.targets import kind_mask, lane_kind_mask
from expo_prof.timeline import Kind, LaneKind, Timeline

PROFILER_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
#: vLLM's per-step annotation (``execute_context_<n>(<tokens>)_generation_<n>(<tokens>)``, vLLM ≥ 0.11), the
#: one place its shape is written: any step (the windows below), its batch (steps/facts.py), an empty step.
VLLM_STEP_RE = re.compile(r"^execute_context_\d+\(")
#: The same annotation with its batch: prompt (context) requests and tokens, decode (generation) ones.
VLLM_BATCH_RE = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
#: vLLM's step annotation of a step with no token scheduled: no sampler runs in it.
VLLM_EMPTY_STEP = "execute_context_0(0)_generation_0(0)"


@dataclass
class Steps:
    """Step windows of one Timeline: ``[start[i], end[i])`` is step ``ids[i]``, sorted by start."""

    ids: np.ndarray  # int64
    start: np.ndarray
    end: np.ndarray
    source: str  # "step-column", "ProfilerStep", "vllm-annotation", "none"
    #: Per window: vLLM's annotation says no token was scheduled (``execute_context_0(0)_generation_0(0)``);
    #: None for other markers. Kept here because a compacted Timeline no longer has the marker names.
    empty: np.ndarray | None = None
    #: Where each step's own marker (or, for a step column, its last event) ends, before the window is stretched
    #: to the next step's start: the step's time is measured from it (analysis/steps/facts.py). None: ``end``.
    mark_end: np.ndarray | None = None
    #: The marker's name id per window (vLLM's annotation names the batch); None where no marker names it.
    mark_name: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)


def dedupe_markers(ids: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One window per step id (min start, max end), sorted by start."""
    if len(ids) == 0:
        return ids, start, end
    uid, inv = np.unique(ids, return_inverse=True)
    s = np.full(len(uid), np.iinfo(np.int64).max, dtype=np.int64)
    e = np.full(len(uid), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(s, inv, start)
    np.maximum.at(e, inv, end)
    o = np.argsort(s, kind="stable")
    return uid[o], s[o], e[o]


def step_windows(tl: Timeline, prefer: LaneKind | None = None) -> Steps:
    """Step windows of a Timeline.

    In order: the reader's per-event step column (Ascend ``Step Id``, overlay
    log ``step``); ``ProfilerStep#N`` markers; vLLM's ``execute_context_…``
    step annotations (numbered in order). Markers on lanes of ``prefer``'s kind
    win (device-side copies of the step markers place device work better).
    Window ``i`` is ``[start_i, max(end_i, start_{i+1}))`` — the vLLM step
    annotation covers ``execute_model`` only, the sampler runs just after it.
    """
    end = tl.start + tl.dur
    if tl.step is not None and len(tl) and ((tl.step >= 0) & (tl.kind != Kind.STEP)).any():
        # The reader knows each event's step (Ascend "Step Id", overlay log).
        m = (tl.step >= 0) & (tl.kind != Kind.STEP)
        ids, s, e = dedupe_markers(tl.step[m].astype(np.int64), tl.start[m], end[m])
        return Steps(ids, s, e, "step-column", mark_end=e)
    names_prof = np.full(len(tl.names), -1, dtype=np.int64)
    names_vllm = np.zeros(len(tl.names), dtype=bool)
    for i, nm in enumerate(tl.names):
        mt = PROFILER_STEP_RE.match(nm)
        if mt:
            names_prof[i] = int(mt.group(1))
        elif VLLM_STEP_RE.match(nm):
            names_vllm[i] = True
    marker_kind = kind_mask(tl, (Kind.STEP, Kind.ANNOTATION))
    for source in ("ProfilerStep", "vllm-annotation"):
        if source == "ProfilerStep":
            m = marker_kind & (names_prof[tl.name] >= 0) if len(tl) else np.zeros(0, bool)
        else:
            m = marker_kind & names_vllm[tl.name] if len(tl) else np.zeros(0, bool)
        if not m.any():
            continue
        if prefer is not None:
            mp = m & lane_kind_mask(tl, (prefer,))
            if mp.any():
                m = mp
        rows = np.flatnonzero(m)
        names = None
        if source == "ProfilerStep":
            ids = names_prof[tl.name[rows]]
            ids, s, e = dedupe_markers(ids, tl.start[rows], end[rows])
        else:
            # Several lanes may carry the same annotation: keep one lane's (the busiest).
            lanes, counts = np.unique(tl.lane[rows], return_counts=True)
            rows = rows[tl.lane[rows] == lanes[np.argmax(counts)]]
            o = np.argsort(tl.start[rows], kind="stable")
            rows = rows[o]
            ids = np.arange(len(rows), dtype=np.int64)
            s, e = tl.start[rows], end[rows]
            empty = np.isin(tl.name[rows], [i for i, n in enumerate(tl.names) if n == VLLM_EMPTY_STEP])
            names = tl.name[rows]
        mark_end = e.copy()
        nxt = np.append(s[1:], np.iinfo(np.int64).max)
        e = np.maximum(e, np.minimum(nxt, np.iinfo(np.int64).max))
        # The last window ends where its marker ends or where the trace ends.
        if len(e):
            e[-1] = max(int(end.max()), int(s[-1]))
        return Steps(ids, s, e, source, empty if source == "vllm-annotation" else None, mark_end=mark_end,
                     mark_name=names)
    z = np.empty(0, np.int64)
    return Steps(z, z, z, "none")


def launch_start(tl: Timeline) -> np.ndarray | None:
    """Host launch time of each event (its own start for host events), or None without correlation ids.

    Kineto links a device kernel to the runtime call that launched it
    (``cudaLaunchKernel``…) by a correlation id; a kernel belongs to the step
    in which it was *launched*, however late the device ran it (HTA assigns
    iterations the same way).
    """
    corr = tl.meta.get("correlation")
    if corr is None or len(corr) != len(tl) or len(tl) == 0:
        return None
    corr = np.asarray(corr, dtype=np.int64)
    host = np.flatnonzero((tl.kind == Kind.RUNTIME) & lane_kind_mask(tl, (LaneKind.THREAD,)) & (corr >= 0))
    dev = np.flatnonzero(lane_kind_mask(tl, (LaneKind.STREAM,)) & (corr >= 0))
    if len(host) == 0 or len(dev) == 0:
        return None
    # First launch per correlation id (ids are unique per launch in practice).
    order = np.lexsort((tl.start[host], corr[host]))
    hc, hs = corr[host][order], tl.start[host][order]
    first = np.concatenate(([True], hc[1:] != hc[:-1]))
    hc, hs = hc[first], hs[first]
    k = np.clip(np.searchsorted(hc, corr[dev]), 0, len(hc) - 1)
    found = hc[k] == corr[dev]
    out = tl.start.copy()
    out[dev[found]] = hs[k[found]]
    return out


def assign_steps(steps: Steps, t: np.ndarray) -> np.ndarray:
    """Step id of each time ``t``: the last window starting at or before it and ending after it; -1 otherwise."""
    t = np.asarray(t, dtype=np.int64)
    if len(steps) == 0:
        return np.full(t.shape, -1, dtype=np.int64)
    k = np.searchsorted(steps.start, t, side="right") - 1
    kc = np.clip(k, 0, None)
    ok = (k >= 0) & (t < steps.end[kc])
    return np.where(ok, steps.ids[kc], -1)


def step_col(tl: Timeline) -> np.ndarray:
    """The step column of ``tl`` (steps whose source is "step-column" come from a Timeline that has one)."""
    assert tl.step is not None
    return tl.step


def spans_by_step(tl: Timeline, steps: Steps, rows: np.ndarray, when: np.ndarray) -> dict[int, int]:
    """Sum of the (unioned) spans ``rows`` per step (step of each row: its ``when`` time, or the step column)."""
    if len(rows) == 0:
        return {}
    sid = step_col(tl)[rows].astype(np.int64) if steps.source == "step-column" else assign_steps(steps, when[rows])
    return union_by_step(sid, tl.start[rows], tl.start[rows] + tl.dur[rows])


def union_by_step(sid: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict[int, int]:
    """``{step id: measure of the union of the intervals [start, end) of that step}`` (``sid`` per interval)."""
    if len(sid) == 0:
        return {}
    # One sort for every step (intervals.measure_by_segment), no union per step: a 20,000-step trace
    # would otherwise make 20,000 small numpy calls.
    ids, measures = iv.measure_by_segment(sid, start, end)
    return dict(zip(ids.tolist(), measures.tolist()))

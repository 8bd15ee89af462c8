"""Hidden vs exposed time of each target instance, and its step (pure functions).

*Hidden* is the part of an instance's own busy time during which another
compute lane of the same device and rank was busy too; *exposed* is the rest.
What counts as a compute lane depends on where the instance runs:

* device stream → compute kernels (:attr:`Kind.KERNEL`) on the *other*
  streams of the same device (for a profiler-derived lane such as Ascend's
  HCCL communication ops: on every stream of the device). Communication and
  memcpy/memset do not count as compute (so ``--op nccl`` measures comm
  hidden under compute, like HTA).
* host thread (CPU runs) → operators and annotations (``CPU_OP``,
  ``ANNOTATION``) on the *other* threads of the rank: the forward pass runs on
  the worker thread, the overlay draws ``q`` on a spare one. The overlay's own
  exponential/wait spans are never busy time.
* overlay event log → the forward windows of the same step.

Target events themselves are never busy time: a draw overlapping another draw
is not hidden under the forward pass. Nor is what a lane records *during* its
own draw (the kernel inside an ``expo_prof::exponential`` span): a stream or
thread does one thing at a time, so that is the draw itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from expo_prof.analysis import intervals as iv
from expo_prof.analysis.cover import Cover, busy_mask
from expo_prof.analysis.pieces import instance_pieces
from expo_prof.analysis.stepfacts import VLLM_EMPTY_STEP, VLLM_STEP_RE, StepFacts, step_facts
from expo_prof.analysis.targets import (
    SPAN_FORWARD,
    Instances,
    find_instances,
    has_device_kernels,
    is_overlay_forward,
    is_overlay_wait,
    lane_kind_mask,
    name_mask,
)
from expo_prof.timeline import Kind, LaneKind, Timeline

PROFILER_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
#: Forward-pass spans, best first.
FORWARD_SPANS = (SPAN_FORWARD, "gpu_model_runner: forward", "execute_context")


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
    #: to the next step's start: the step's time is measured from it (analysis/stepfacts.py). None: ``end``.
    mark_end: np.ndarray | None = None
    #: The marker's name id per window (vLLM's annotation names the batch); None where no marker names it.
    mark_name: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class TimelineAnalysis:
    """Per-instance results of one Timeline, plus its steps."""

    tl: Timeline
    inst: Instances
    total: np.ndarray  # int64 ns per instance
    hidden: np.ndarray
    exposed: np.ndarray
    step: np.ndarray  # int64 step id per instance, -1 = outside any step
    steps: Steps
    forward_by_step: dict[int, int]  # step id -> forward ns
    wait_by_step: dict[int, int]  # step id -> sampler wait ns
    forward_source: str
    wait_total: int
    wall: int  # ns covered by the union of all instances
    wall_hidden: int  # ns of that union covered by compute on the device
    #: The inputs hold the sampler's wait (overlay spans / event log) and something to measure the forward by:
    #: without them wait / forward are unknown, not zero.
    wait_measured: bool = False
    forward_measured: bool = False
    #: Step id -> ns the noise held the critical path (exposed pieces ∪ sampler waits); None when no wait
    #: is measured here (then it is exposed + wait, e.g. with waits mapped in from an overlay log).
    critical_by_step: dict[int, int] | None = None
    #: What each step was: its time, prefill or decode, batch, q (analysis/stepfacts.py).
    facts: StepFacts = field(default_factory=StepFacts)

    def __len__(self) -> int:
        return len(self.inst)


def hidden_time(tl: Timeline, inst: Instances) -> np.ndarray:
    """Hidden ns of each instance: its members covered by busy time on the other lanes of its device."""
    hidden = np.zeros(len(inst), dtype=np.int64)
    if len(inst) == 0:
        return hidden
    cover = Cover(tl, inst)
    member_lane = inst.lane[inst.member_inst]
    for lane in np.unique(inst.lane):
        sel = member_lane == lane
        cov = iv.coverage(cover.of(int(lane)), inst.member_start[sel], inst.member_end[sel])
        np.add.at(hidden, inst.member_inst[sel], cov)
    return hidden


def wall_time(tl: Timeline, inst: Instances) -> tuple[int, int]:
    """``(wall, wall_hidden)``: the union of all instances' members, and the part of it covered by compute.

    Differs from the per-instance sums only when instances overlap each other
    (e.g. NCCL kernels running concurrently on several streams): the union
    counts such time once. Compute here is every busy lane of the device,
    targets excluded — this is HolisticTraceAnalysis' comm/comp overlap when
    the targets are the NCCL kernels.
    """
    if len(inst) == 0:
        return 0, 0
    cover = Cover(tl, inst)
    member_dev = cover.dev[inst.lane[inst.member_inst]]
    wall = hidden = 0
    for d in np.unique(member_dev):
        sel = member_dev == d
        u = iv.union(inst.member_start[sel], inst.member_end[sel])
        busy = cover.device(int(inst.lane[inst.member_inst[np.flatnonzero(sel)[0]]]))
        wall += u.measure
        hidden += iv.intersection(u, busy).measure
    return wall, hidden


def _dedupe_markers(ids: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        ids, s, e = _dedupe_markers(tl.step[m].astype(np.int64), tl.start[m], end[m])
        return Steps(ids, s, e, "step-column", mark_end=e)
    names_prof = np.full(len(tl.names), -1, dtype=np.int64)
    names_vllm = np.zeros(len(tl.names), dtype=bool)
    for i, nm in enumerate(tl.names):
        mt = PROFILER_STEP_RE.match(nm)
        if mt:
            names_prof[i] = int(mt.group(1))
        elif VLLM_STEP_RE.match(nm):
            names_vllm[i] = True
    marker_kind = np.isin(tl.kind, (Kind.STEP, Kind.ANNOTATION))
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
            ids, s, e = _dedupe_markers(ids, tl.start[rows], end[rows])
        else:
            # Several lanes may carry the same annotation: keep one lane's (the busiest).
            lanes, counts = np.unique(tl.lane[rows], return_counts=True)
            rows = rows[tl.lane[rows] == lanes[np.argmax(counts)]]
            o = np.argsort(tl.start[rows], kind="stable")
            rows = rows[o]
            ids = np.arange(len(rows), dtype=np.int64)
            s, e = tl.start[rows], end[rows]
            empty = np.array([tl.names[int(n)] == VLLM_EMPTY_STEP for n in tl.name[rows]], dtype=bool)
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


def _step_col(tl: Timeline) -> np.ndarray:
    """The step column of ``tl`` (steps whose source is "step-column" come from a Timeline that has one)."""
    assert tl.step is not None
    return tl.step


def _spans_by_step(tl: Timeline, steps: Steps, rows: np.ndarray, when: np.ndarray) -> dict[int, int]:
    """Sum of the (unioned) spans ``rows`` per step (step of each row: its ``when`` time, or the step column)."""
    if len(rows) == 0:
        return {}
    sid = _step_col(tl)[rows].astype(np.int64) if steps.source == "step-column" else assign_steps(steps, when[rows])
    return union_by_step(sid, tl.start[rows], tl.start[rows] + tl.dur[rows])


def union_by_step(sid: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict[int, int]:
    """``{step id: measure of the union of the intervals [start, end) of that step}`` (``sid`` per interval)."""
    if len(sid) == 0:
        return {}
    # One sort and split, not a mask per step: a mask per step is steps x events
    # (minutes for a 10,000-step trace).
    order = np.argsort(sid, kind="stable")
    sid_s = sid[order]
    cuts = np.flatnonzero(np.diff(sid_s)) + 1
    return {
        int(sid[idx[0]]): iv.union(start[idx], end[idx]).measure
        for idx in np.split(order, cuts)
    }


def pick_lane_kind(tl: Timeline, m: np.ndarray) -> np.ndarray:
    """Keep matches of one lane kind only: device > overlay > host (avoid summing copies of a span)."""
    for lk in (LaneKind.STREAM, LaneKind.OVERLAY, LaneKind.THREAD):
        mm = m & lane_kind_mask(tl, (lk,))
        if mm.any():
            return mm
    return m


def wait_rows(tl: Timeline) -> np.ndarray:
    """Rows of the sampler's wait spans (overlay spans / overlay-log windows), of one lane kind."""
    m = name_mask(tl, is_overlay_wait) & np.isin(tl.kind, (Kind.ANNOTATION, Kind.OVERLAY))
    return np.flatnonzero(pick_lane_kind(tl, m))


def forward_span_rows(tl: Timeline, name: str) -> np.ndarray:
    """Rows of the forward-pass spans of one of :data:`FORWARD_SPANS` (``name``), of one lane kind."""
    if name == SPAN_FORWARD:
        m = name_mask(tl, is_overlay_forward)
    elif name == "execute_context":
        m = name_mask(tl, lambda n: bool(VLLM_STEP_RE.match(n)))
    else:
        m = name_mask(tl, lambda n: n == name)
    return np.flatnonzero(pick_lane_kind(tl, m & np.isin(tl.kind, (Kind.ANNOTATION, Kind.OVERLAY, Kind.STEP))))


def analyze_timeline(tl: Timeline, op: re.Pattern | None = None) -> TimelineAnalysis:
    """Find the target instances of ``tl`` and split their time into hidden and exposed, per step."""
    inst = find_instances(tl, op)
    total = inst.total
    hidden = hidden_time(tl, inst)
    exposed = total - hidden
    wall, wall_hidden = wall_time(tl, inst)
    inst_kind = tl.lanes[int(inst.lane[0])].kind if len(inst) else None
    launch = launch_start(tl)
    when = launch if launch is not None else tl.start
    # Launch times are host times: then the host's step markers decide.
    prefer = LaneKind.THREAD if launch is not None else inst_kind
    steps = step_windows(tl, prefer)
    first_member = inst.events[np.searchsorted(inst.member_inst, np.arange(len(inst)))] if len(inst) else inst.events
    if steps.source == "step-column":
        step = _step_col(tl)[first_member].astype(np.int64)
    else:
        step = assign_steps(steps, when[first_member])

    # Sampler wait: overlay spans / overlay-log windows.
    w_rows = wait_rows(tl)
    wait_by_step = _spans_by_step(tl, steps, w_rows, when)
    wait_total = int(sum(wait_by_step.values()))
    critical_by_step = _critical_by_step(tl, inst, step, steps, w_rows, when) if len(w_rows) else None
    w_sid = _step_col(tl)[w_rows].astype(np.int64) if steps.source == "step-column" else assign_steps(steps, when[w_rows])
    facts = step_facts(tl, steps, np.concatenate((step, w_sid)),
                       np.concatenate((inst.end if len(inst) else np.empty(0, np.int64), tl.end[w_rows])))

    # Forward time: the best forward span present, else the compute busy time of the step.
    forward_source = "compute-busy"
    fwd_rows = np.empty(0, np.int64)
    for name in FORWARD_SPANS:
        rows = forward_span_rows(tl, name)
        if len(rows):
            forward_source, fwd_rows = name, rows
            break
    if forward_source == "compute-busy":
        lk = inst_kind if inst_kind is not None else (LaneKind.STREAM if has_device_kernels(tl) else LaneKind.THREAD)
        m = busy_mask(tl, lk)
        if len(inst):
            m[inst.matched] = False
        fwd_rows = np.flatnonzero(m)
    forward_by_step = _spans_by_step(tl, steps, fwd_rows, when)

    return TimelineAnalysis(
        tl=tl,
        inst=inst,
        total=total,
        hidden=hidden,
        exposed=exposed,
        step=step,
        steps=steps,
        forward_by_step=forward_by_step,
        wait_by_step=wait_by_step,
        forward_source=forward_source,
        wait_total=wait_total,
        wall=wall,
        wall_hidden=wall_hidden,
        wait_measured=len(w_rows) > 0,
        forward_measured=len(fwd_rows) > 0,
        critical_by_step=critical_by_step,
        facts=facts,
    )


def _critical_by_step(tl: Timeline, inst: Instances, step: np.ndarray, steps: Steps, w_rows: np.ndarray,
                      when: np.ndarray) -> dict[int, int]:
    """Per step, the time the noise holds the critical path: the union of the draws' exposed pieces and the
    sampler's waits.

    Not their sum: a draw still running when the sampler starts to wait is
    exposed *during* the wait, and that time is paid once. A wait after the
    draw ended (the hand-over from the lane: waking the model thread, an event
    wait) is paid on top of it.
    """
    pieces = instance_pieces(_Parts(tl, inst))
    exposed = ~pieces.hidden
    sid_w = _step_col(tl)[w_rows].astype(np.int64) if steps.source == "step-column" else assign_steps(steps, when[w_rows])
    return union_by_step(
        np.concatenate((step[pieces.inst[exposed]], sid_w)),
        np.concatenate((pieces.start[exposed], tl.start[w_rows])),
        np.concatenate((pieces.end[exposed], tl.start[w_rows] + tl.dur[w_rows])),
    )


@dataclass
class _Parts:
    """What :func:`~expo_prof.analysis.pieces.instance_pieces` reads: a Timeline and its instances."""

    tl: Timeline
    inst: Instances

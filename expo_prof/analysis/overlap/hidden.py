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
from expo_prof.analysis.overlap.cover import Cover, busy_mask
from expo_prof.analysis.overlap.pieces import instance_pieces
from expo_prof.analysis.steps.facts import StepFacts, step_facts
from expo_prof.analysis.steps.windows import (
    VLLM_STEP_RE,
    Steps,
    assign_steps,
    launch_start,
    spans_by_step,
    step_col,
    step_windows,
    union_by_step,
)
from expo_prof.analysis.targets import (
    SPAN_FORWARD,
    Instances,
    find_instances,
    has_device_kernels,
    is_overlay_forward,
    is_overlay_wait,
    kind_mask,
    lane_kind_mask,
    name_mask,
)
from expo_prof.timeline import Kind, LaneKind, Timeline
from expo_prof.analysis.arrays import distinct

#: Forward-pass spans, best first.
FORWARD_SPANS = (SPAN_FORWARD, "gpu_model_runner: forward", "execute_context")


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
    #: Which source measured the wait: "span" (a trace's expo_prof::wait spans) or "log window" (the overlay
    #: event log's wait windows, read alone or mapped onto a trace); None when none was measured.
    wait_source: str | None = None
    forward_measured: bool = False
    #: Step id -> ns the noise held the critical path (exposed pieces ∪ sampler waits); None when no wait
    #: is measured here (then it is exposed + wait, e.g. with waits mapped in from an overlay log).
    critical_by_step: dict[int, int] | None = None
    #: What each step was: its time, prefill or decode, batch, q (analysis/steps/facts.py).
    facts: StepFacts = field(default_factory=StepFacts)

    def __len__(self) -> int:
        return len(self.inst)


def hidden_time(tl: Timeline, inst: Instances, cover: Cover | None = None) -> np.ndarray:
    """Hidden ns of each instance: its members covered by busy time on the other lanes of its device."""
    hidden = np.zeros(len(inst), dtype=np.int64)
    if len(inst) == 0:
        return hidden
    cover = cover or Cover(tl, inst)
    member_lane = inst.lane[inst.member_inst]
    for lane in distinct(inst.lane):
        sel = member_lane == lane
        cov = iv.coverage(cover.of(int(lane)), inst.member_start[sel], inst.member_end[sel])
        np.add.at(hidden, inst.member_inst[sel], cov)
    return hidden


def wall_time(tl: Timeline, inst: Instances, cover: Cover | None = None) -> tuple[int, int]:
    """``(wall, wall_hidden)``: the union of all instances' members, and the part of it covered by compute.

    Differs from the per-instance sums only when instances overlap each other
    (e.g. NCCL kernels running concurrently on several streams): the union
    counts such time once. Compute here is every busy lane of the device,
    targets excluded — this is HolisticTraceAnalysis' comm/comp overlap when
    the targets are the NCCL kernels.
    """
    if len(inst) == 0:
        return 0, 0
    cover = cover or Cover(tl, inst)
    member_dev = cover.dev[inst.lane[inst.member_inst]]
    wall = hidden = 0
    for d in distinct(member_dev):
        sel = member_dev == d
        u = iv.union(inst.member_start[sel], inst.member_end[sel])
        busy = cover.device(int(inst.lane[inst.member_inst[np.flatnonzero(sel)[0]]]))
        wall += u.measure
        hidden += iv.intersection(u, busy).measure
    return wall, hidden


def pick_lane_kind(tl: Timeline, m: np.ndarray) -> np.ndarray:
    """Keep matches of one lane kind only: device > overlay > host (avoid summing copies of a span)."""
    for lk in (LaneKind.STREAM, LaneKind.OVERLAY, LaneKind.THREAD):
        mm = m & lane_kind_mask(tl, (lk,))
        if mm.any():
            return mm
    return m


def wait_rows(tl: Timeline) -> np.ndarray:
    """Rows of the sampler's wait spans (overlay spans / overlay-log windows), of one lane kind."""
    m = name_mask(tl, is_overlay_wait) & kind_mask(tl, (Kind.ANNOTATION, Kind.OVERLAY))
    return np.flatnonzero(pick_lane_kind(tl, m))


def forward_span_rows(tl: Timeline, name: str) -> np.ndarray:
    """Rows of the forward-pass spans of one of :data:`FORWARD_SPANS` (``name``), of one lane kind."""
    if name == SPAN_FORWARD:
        m = name_mask(tl, is_overlay_forward)
    elif name == "execute_context":
        m = name_mask(tl, lambda n: bool(VLLM_STEP_RE.match(n)))
    else:
        m = name_mask(tl, lambda n: n == name)
    return np.flatnonzero(pick_lane_kind(tl, m & kind_mask(tl, (Kind.ANNOTATION, Kind.OVERLAY, Kind.STEP))))


def analyze_timeline(tl: Timeline, op: re.Pattern | None = None) -> TimelineAnalysis:
    """Find the target instances of ``tl`` and split their time into hidden and exposed, per step."""
    inst = find_instances(tl, op)
    total = inst.total
    # One busy-time computation serves the hidden totals, the wall figures and the critical path's pieces.
    cover = Cover(tl, inst)
    hidden = hidden_time(tl, inst, cover)
    exposed = total - hidden
    wall, wall_hidden = wall_time(tl, inst, cover)
    inst_kind = tl.lanes[int(inst.lane[0])].kind if len(inst) else None
    launch = launch_start(tl)
    when = launch if launch is not None else tl.start
    # Launch times are host times: then the host's step markers decide.
    prefer = LaneKind.THREAD if launch is not None else inst_kind
    steps = step_windows(tl, prefer)
    first_member = inst.events[np.searchsorted(inst.member_inst, np.arange(len(inst)))] if len(inst) else inst.events
    if steps.source == "step-column":
        step = step_col(tl)[first_member].astype(np.int64)
    else:
        step = assign_steps(steps, when[first_member])

    # Sampler wait: overlay spans / overlay-log windows.
    w_rows = wait_rows(tl)
    wait_by_step = spans_by_step(tl, steps, w_rows, when)
    wait_total = int(sum(wait_by_step.values()))
    critical_by_step = _critical_by_step(tl, inst, step, steps, w_rows, when, cover) if len(w_rows) else None
    w_sid = step_col(tl)[w_rows].astype(np.int64) if steps.source == "step-column" else assign_steps(steps, when[w_rows])
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
    forward_by_step = spans_by_step(tl, steps, fwd_rows, when)

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
        wait_source=(None if not len(w_rows) else "log window" if tl.fmt == "overlay-log" else "span"),
        forward_measured=len(fwd_rows) > 0,
        critical_by_step=critical_by_step,
        facts=facts,
    )


def _critical_by_step(tl: Timeline, inst: Instances, step: np.ndarray, steps: Steps, w_rows: np.ndarray,
                      when: np.ndarray, cover: Cover) -> dict[int, int]:
    """Per step, the time the noise holds the critical path: the union of the draws' exposed pieces and the
    sampler's waits.

    Not their sum: a draw still running when the sampler starts to wait is
    exposed *during* the wait, and that time is paid once. A wait after the
    draw ended (the hand-over from the lane: waking the model thread, an event
    wait) is paid on top of it.
    """
    pieces = instance_pieces(_Parts(tl, inst), cover)
    exposed = ~pieces.hidden
    sid_w = step_col(tl)[w_rows].astype(np.int64) if steps.source == "step-column" else assign_steps(steps, when[w_rows])
    return union_by_step(
        np.concatenate((step[pieces.inst[exposed]], sid_w)),
        np.concatenate((pieces.start[exposed], tl.start[w_rows])),
        np.concatenate((pieces.end[exposed], tl.start[w_rows] + tl.dur[w_rows])),
    )


@dataclass
class _Parts:
    """What :func:`~expo_prof.analysis.overlap.pieces.instance_pieces` reads: a Timeline and its instances."""

    tl: Timeline
    inst: Instances

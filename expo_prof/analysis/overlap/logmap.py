"""The overlay event log's sampler waits (and forward windows) placed onto a profiler trace's steps.

A profiler trace without the overlay's ``expo_prof::wait`` spans (an Ascend
export, a trace recorded without the overlay's profiler patch) still has the
instances and the steps; the overlay event log of the same rank has the waits,
on the host monotonic clock. :func:`attach_overlay_logs` puts the log's
windows on the trace's clock (:func:`expo_prof.clocks.log_onto_trace`) and
gives each to the trace step whose window contains it, so per-step ``wait_ns``
(and, when the trace has no ``expo_prof::forward`` span, ``forward_ns``) come
from the log. When the clocks cannot be related the wait is only summed per
rank, as before, and a warning says why.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from expo_prof.analysis import intervals as iv
from expo_prof.analysis.overlap.hidden import TimelineAnalysis
from expo_prof.analysis.steps.windows import assign_steps, union_by_step
from expo_prof.analysis.targets import SPAN_FORWARD, is_overlay_forward, is_overlay_wait, name_mask
from expo_prof.clocks import log_onto_trace
from expo_prof.timeline import Kind, Timeline, overlay_log


@dataclass
class LogAttachment:
    """What :func:`attach_overlay_logs` made of a rank's trace parts and overlay logs."""

    #: The trace parts, with the log's per-step wait (and forward) filled in when mapped.
    parts: list[TimelineAnalysis]
    #: True when at least one log was placed on the trace's steps.
    mapped: bool
    #: Wait (ns) to add to the rank's total because no log could be mapped (today's per-rank sum).
    rank_only_wait_ns: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Windows:
    """Windows of one kind from the mapped logs, on the trace's clock."""

    start: np.ndarray
    end: np.ndarray
    when: np.ndarray  # time that decides the step

    @classmethod
    def empty(cls) -> _Windows:
        z = np.empty(0, np.int64)
        return cls(z, z, z)

    def __len__(self) -> int:
        return len(self.start)

    def extend(self, other: _Windows) -> _Windows:
        return _Windows(*(np.concatenate((a, b)) for a, b in
                          ((self.start, other.start), (self.end, other.end), (self.when, other.when))))


def _windows(log: Timeline, pred, off: int) -> _Windows:
    """The log's windows named by ``pred``, shifted by ``off``, with the time that decides their step.

    Host-timed windows (CPU lane) are exact host times: a window goes to the
    step that contains its *midpoint*, the point furthest from both of its ends
    — a step boundary lies just before the forward starts and just after the
    wait ends, so a small clock-mapping error can move an end across it, not
    the middle. Device-timed windows (``timing: "device"``) are exact only
    relative to each other; the step line's ``t0_ns`` (host time at launch,
    just before the forward) places them, as a device kernel belongs to the
    step in which the host launched it.
    """
    rows = np.flatnonzero(name_mask(log, pred) & (log.kind == Kind.OVERLAY))
    start = log.start[rows] + off
    end = start + log.dur[rows]
    when = start + (end - start) // 2
    ov = overlay_log(log)
    cols = ov.steps if ov is not None else None
    if cols and log.step is not None and len(rows):
        launch = {int(s): int(t0) for s, t0, tm in zip(cols["step"], cols["t0_ns"], cols["timing"]) if tm == "device"}
        if launch:
            for k, r in enumerate(rows):
                t0 = launch.get(int(log.step[r]))
                if t0 is not None:
                    when[k] = t0 + off
    return _Windows(start, end, when)


def _by_part(parts: list[TimelineAnalysis], w: _Windows) -> tuple[list[dict[int, int]], np.ndarray]:
    """Per part: ``{step id: ns}`` (union of the windows in that step); and a mask of windows in no step."""
    left = np.ones(len(w), dtype=bool)
    out: list[dict[int, int]] = []
    for p in parts:
        sid = np.full(len(w), -1, dtype=np.int64)
        if left.any():
            sid[left] = assign_steps(p.steps, w.when[left])
        inside = sid >= 0
        out.append(union_by_step(sid[inside], w.start[inside], w.end[inside]))
        left &= ~inside
    return out, left


def _outside_ns(w: _Windows, mask: np.ndarray) -> int:
    return iv.union(w.start[mask], w.end[mask]).measure if mask.any() else 0


def attach_overlay_logs(parts: list[TimelineAnalysis], logs: list[TimelineAnalysis], who: str) -> LogAttachment:
    """Fill the trace ``parts``' per-step wait from the overlay event ``logs`` of the same run and rank.

    ``parts`` hold no sampler-wait span of their own. Each log is placed on
    the clock of the first part it relates to; its wait windows go to the
    step (of any part) that contains them. Windows outside every step, and
    the waits of logs that could not be placed, count in the rank's total (the
    ``-1`` "outside any step" bucket of the first part) and are named in a
    warning. The forward windows replace the parts' forward time only when no
    part has the overlay's own ``expo_prof::forward`` span, the best forward
    source (docs/json-output.md), and only in parts that received some;
    forward windows outside every step are left out (and counted in the warning).
    ``who`` prefixes the warnings (``"rank 0"``).
    """
    waits, fwds = _Windows.empty(), _Windows.empty()
    n_mapped, via_pair, reasons = 0, False, []
    unplaced: list[TimelineAnalysis] = []
    stepped = [p for p in parts if len(p.steps)]
    for la in logs:
        log = la.tl
        off, why = None, "the trace has no step markers" if not stepped else ""
        for p in stepped:
            off, why = log_onto_trace(log, p.tl)
            if off is not None:
                break
        if off is None:
            reasons.append(why)
            unplaced.append(la)
            continue
        n_mapped += 1
        via_pair |= off != 0
        waits = waits.extend(_windows(log, is_overlay_wait, off))
        fwds = fwds.extend(_windows(log, is_overlay_forward, off))

    total_wait = int(sum(la.wait_total for la in unplaced))
    if not n_mapped:
        return LogAttachment(parts, False, total_wait, [
            f"{who}: sampler wait taken from the overlay event log ({total_wait} ns in total), summed per rank only: "
            f"its steps could not be mapped onto the trace's steps because {reasons[0]}"
        ])

    wait_parts, wait_out = _by_part(parts, waits)
    use_fwd = len(fwds) > 0 and not any(p.forward_source == SPAN_FORWARD for p in parts)
    fwd_parts, fwd_out = _by_part(parts, fwds) if use_fwd else ([{}] * len(parts), np.zeros(0, bool))
    out_wait = _outside_ns(waits, wait_out) + total_wait
    new: list[TimelineAnalysis] = []
    for i, (p, w, f) in enumerate(zip(parts, wait_parts, fwd_parts)):
        w = dict(w)
        if i == 0 and (wait_out.any() or unplaced):
            w[-1] = w.get(-1, 0) + out_wait
        changes: dict = {"wait_by_step": w, "wait_total": int(sum(w.values())), "wait_measured": True,
                         "wait_source": "log window"}
        if f:
            changes.update(forward_by_step=dict(f), forward_source=SPAN_FORWARD, forward_measured=True)
        new.append(dataclasses.replace(p, **changes))

    fwd_used = any(fwd_parts)
    what = "sampler wait and forward" if fwd_used else "sampler wait"
    how = "via its header's wall/monotonic clock pair" if via_pair else "(the trace is on the log's host clock)"
    warnings = [f"{who}: {what} per step taken from the overlay event log, placed on the trace's clock {how}"]
    outside = []
    if wait_out.any():
        outside.append(f"{int(wait_out.sum())} of {len(waits)} wait window(s) ({_outside_ns(waits, wait_out)} ns) "
                       "are counted in the rank's wait, in no step")
    if fwd_used and fwd_out.any():
        # Unlike the wait (never dropped), forward time outside the profiled steps would only dilute
        # the rank's forward, which sits beside the instances of the profiled steps alone.
        outside.append(f"{int(fwd_out.sum())} of {len(fwds)} forward window(s) are left out of the forward time")
    if outside:
        warnings.append(f"{who}: overlay-log windows outside every step of the trace (the profiler recorded only "
                        f"part of the run?): {'; '.join(outside)}")
    for la, why in zip(unplaced, reasons):
        warnings.append(f"{who}: {la.tl.source}: sampler wait ({la.wait_total} ns) counted in the rank's total only: "
                        f"its steps could not be mapped onto the trace's steps because {why}")
    return LogAttachment(new, True, 0, warnings)


"""Which clock a Timeline's times are on, and how to put sources on one clock.

Kineto and Ascend traces stamp events in epoch (wall-clock) nanoseconds; the
overlay event log stamps them on the host monotonic clock, and its header
reads both clocks together (``OverlayLog.wall_minus_mono_ns``).
Both the analysis (placing a log's windows onto a trace's steps) and the HTML
pages (one time axis) need this, so it lives outside either package.
"""

from __future__ import annotations

from expo_prof.timeline import Timeline, overlay_log

#: Clocks further apart than this are not the same clock: each source then starts at 0.
SAME_CLOCK_NS = 24 * 3600 * 10**9
#: Times above this (2001-01-01 in epoch ns) are taken to be epoch time; a host
#: monotonic clock (time since boot) stays far below it.
EPOCH_2001_NS = 978_307_200 * 10**9
OVERLAY_LOG = "overlay-log"


def is_epoch(tl: Timeline) -> bool:
    """True when ``tl``'s times look like epoch ns (Kineto, Ascend), not a monotonic clock."""
    return len(tl) > 0 and int(tl.start.min()) > EPOCH_2001_NS


def wall_minus_mono(tl: Timeline) -> int | None:
    """ns to add to an overlay log's (host monotonic) times to get epoch ns; None without the header's pair."""
    ov = overlay_log(tl)
    return None if ov is None else ov.wall_minus_mono_ns


def clock_offsets(tls: list[Timeline]) -> tuple[list[int], str]:
    """Per Timeline, ns to add to put it on a shared clock; and a note on how.

    Overlay event logs run on the host monotonic clock; their header maps it to
    epoch time, which Kineto and Ascend traces use. When every source then lies
    within a day of the others they share one axis; otherwise each starts at 0.
    """
    epoch_like = [is_epoch(t) for t in tls if len(t) and t.fmt != OVERLAY_LOG]
    offs = []
    for t in tls:
        off = 0
        if t.fmt == OVERLAY_LOG and any(epoch_like):
            wm = wall_minus_mono(t)
            if wm is not None:
                off = wm
        offs.append(off)
    firsts = [int(t.start.min()) + o for t, o in zip(tls, offs) if len(t)]
    lasts = [int(t.end.max()) + o for t, o in zip(tls, offs) if len(t)]
    if firsts and max(lasts) - min(firsts) > SAME_CLOCK_NS:
        return [-(int(t.start.min()) if len(t) else 0) for t in tls], "sources are on different clocks: each starts at 0"
    note = "overlay event log placed on the trace clock via its header's wall/monotonic pair" if any(offs) else ""
    return offs, note


def log_onto_trace(log: Timeline, trace: Timeline) -> tuple[int | None, str]:
    """ns to add to the overlay log ``log``'s times to put them on ``trace``'s clock, or None and why not.

    An epoch-clock trace needs the log header's wall/monotonic pair. A trace
    that is not on the epoch clock is taken to share the log's host monotonic
    clock (offset 0). Either way the placed log must overlap the trace's time
    range: a log of another period (or a wrong guess of the clock) lies
    elsewhere entirely, and then nothing can be attributed to the trace's steps.
    """
    if len(log) == 0 or len(trace) == 0:
        return None, "the log or the trace holds no timed event"
    if is_epoch(trace):
        off = wall_minus_mono(log)
        if off is None:
            return None, ("the log's header has no wall/monotonic clock pair (mono_ns, wall_ns) "
                          "to place it on the trace's epoch clock")
    else:
        off = 0
    l0, l1 = int(log.start.min()) + off, int(log.end.max()) + off
    t0, t1 = int(trace.start.min()), int(trace.end.max())
    if l1 < t0 or l0 > t1:
        gap = (t0 - l1) if l1 < t0 else (l0 - t1)
        where = "ends" if l1 < t0 else "starts"
        rel = "before the trace starts" if l1 < t0 else "after the trace ends"
        return None, (f"on the trace's clock the log's time range does not overlap the trace's "
                      f"(it {where} {gap / 1e9:.3f} s {rel})")
    return off, ""

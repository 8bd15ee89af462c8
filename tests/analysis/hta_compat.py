"""What HolisticTraceAnalysis 0.5.0 does to a trace before its comm/comp overlap, re-done on a Timeline.

Used only by the peer-agreement tests, to show that the two documented
differences (docs/peers.md) explain the whole gap between expo-prof and HTA:

1. ``TraceAnalysis(include_last_profiler_step=False)`` (the default) keeps
   only the GPU kernels whose launch (matched by correlation id) started
   before the last ``ProfilerStep``; host events after it are dropped too.
2. ``round_down_time_stamps``: on traces with float (ns-resolution)
   timestamps, every event's start is rounded up and its end down to a whole
   microsecond (``ceil(ts)``, ``floor(ts + dur)``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from expo_prof.timeline import Kind, LaneKind, Timeline


def hta_view(tl: Timeline, *, include_last_profiler_step: bool = False, round_to_us: bool = True) -> Timeline:
    """The events of ``tl`` as HTA's ``TraceAnalysis`` keeps them, with its µs rounding."""
    lk = np.array([int(ln.kind) for ln in tl.lanes], dtype=np.int8)[tl.lane]
    dev = lk == LaneKind.STREAM
    corr = np.asarray(tl.meta["correlation"], dtype=np.int64)
    end = tl.start + tl.dur
    steps = np.flatnonzero((tl.kind == Kind.STEP) & (lk == LaneKind.THREAD))
    keep = np.ones(len(tl), dtype=bool)
    if len(steps) > 1:  # HTA filters only with at least two ProfilerSteps
        last_start, last_end = tl.start[steps].max(), end[steps].max()
        host_ok = ~dev & ((tl.start <= last_end) if include_last_profiler_step else (tl.start < last_start))
        launched = np.unique(corr[host_ok & (corr >= 0)])
        keep = host_ok | (dev & np.isin(corr, launched))
    s, e = tl.start.copy(), end.copy()
    if round_to_us:
        s = -((-s) // 1000) * 1000  # ceil to µs
        e = (e // 1000) * 1000  # floor to µs
    sel = np.flatnonzero(keep)
    meta = dict(tl.meta)
    meta["correlation"] = corr[sel]
    return replace(
        tl,
        start=s[sel],
        dur=np.maximum(e - s, 0)[sel],
        lane=tl.lane[sel],
        name=tl.name[sel],
        kind=tl.kind[sel],
        step=None if tl.step is None else tl.step[sel],
        meta=meta,
    )

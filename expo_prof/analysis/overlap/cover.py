"""What counts as compute that covers (hides) a target instance: the one busy-time definition.

Used by :mod:`expo_prof.analysis.overlap.hidden` (how much of each instance is hidden)
and :mod:`expo_prof.analysis.overlap.pieces` (where inside it), so the totals and the
drawn pieces can never disagree. What counts depends on where the instance runs
(module docstring of :mod:`~expo_prof.analysis.overlap.hidden`).
"""

from __future__ import annotations

import numpy as np

from expo_prof.analysis import intervals as iv
from expo_prof.analysis.targets import (
    SPAN_EXPONENTIAL,
    SPAN_WAIT,
    Instances,
    is_overlay_forward,
    kind_mask,
    lane_kind_mask,
    name_mask,
)
from expo_prof.timeline import OVERLAY_MODEL_BUSY, Kind, LaneKind, Timeline
from expo_prof.analysis.arrays import distinct


def lane_device(tl: Timeline) -> np.ndarray:
    """Device index per lane (interned device strings)."""
    devs: dict[str, int] = {}
    return np.array([devs.setdefault(ln.device, len(devs)) for ln in tl.lanes], dtype=np.int32)


def busy_mask(tl: Timeline, lane_kind: LaneKind) -> np.ndarray:
    """Events that count as compute busy time for instances on a lane of ``lane_kind``.

    Overlay event log: the model's busy windows the reader derives (forward
    start until the sampler begins to wait for q: forward, logits and the
    sampler's own work), else the forward windows (logs without them).
    """
    if lane_kind in (LaneKind.STREAM, LaneKind.LOGICAL):
        return (tl.kind == Kind.KERNEL) & lane_kind_mask(tl, (LaneKind.STREAM,))
    if lane_kind == LaneKind.THREAD:
        own = name_mask(tl, lambda n: n in (SPAN_EXPONENTIAL, SPAN_WAIT))
        return kind_mask(tl, (Kind.CPU_OP, Kind.ANNOTATION)) & lane_kind_mask(tl, (LaneKind.THREAD,)) & ~own
    on_overlay = (tl.kind == Kind.OVERLAY) & lane_kind_mask(tl, (LaneKind.OVERLAY,))
    model = on_overlay & name_mask(tl, lambda n: n == OVERLAY_MODEL_BUSY)
    return model if model.any() else on_overlay & name_mask(tl, is_overlay_forward)


def busy_lanes(tl: Timeline, inst: Instances, lane_kind: LaneKind) -> dict[int, iv.Union]:
    """Busy time per lane for instances on lanes of ``lane_kind``: ``{lane: Union}``.

    Target rows are never busy. On a lane that holds instances, the instances'
    own time is removed too: a stream (or a thread) does one thing at a time,
    so whatever it records during a draw — the kernel inside an
    ``expo_prof::exponential`` span, the ops inside ``aten::exponential_`` —
    is that draw, not compute that could hide another one.
    """
    is_target = np.zeros(len(tl), dtype=bool)
    is_target[inst.matched] = True
    rows = np.flatnonzero(busy_mask(tl, lane_kind) & ~is_target)
    per = iv.lane_unions(tl.lane[rows], tl.start[rows], tl.start[rows] + tl.dur[rows])
    member_lane = inst.lane[inst.member_inst]
    for ln in distinct(inst.lane):
        if int(ln) in per:
            sel = member_lane == ln
            per[int(ln)] = iv.subtract(per[int(ln)], iv.union(inst.member_start[sel], inst.member_end[sel]))
    return per


class Cover:
    """The busy time that can hide the instances of one Timeline, per instance lane (computed once per lane kind)."""

    def __init__(self, tl: Timeline, inst: Instances) -> None:
        self.tl, self.inst = tl, inst
        self.dev = lane_device(tl)
        self._by_kind: dict[int, dict[int, iv.Union]] = {}
        self._of: dict[tuple[str, int], iv.Union] = {}

    def _lanes(self, lane: int) -> dict[int, iv.Union]:
        lk = self.tl.lanes[int(lane)].kind
        if int(lk) not in self._by_kind:
            self._by_kind[int(lk)] = busy_lanes(self.tl, self.inst, lk)
        return self._by_kind[int(lk)]

    def of(self, lane: int) -> iv.Union:
        """Compute on the *other* lanes of ``lane``'s device: what hides an instance on ``lane``."""
        key = ("of", int(lane))
        if key not in self._of:
            self._of[key] = iv.union_of(*[u for ln, u in self._lanes(lane).items()
                                          if ln != lane and self.dev[ln] == self.dev[lane]])
        return self._of[key]

    def device(self, lane: int) -> iv.Union:
        """Compute on every lane of ``lane``'s device (for instances on lanes of ``lane``'s kind)."""
        key = ("device", int(lane))
        if key not in self._of:
            self._of[key] = iv.union_of(*[u for ln, u in self._lanes(lane).items() if self.dev[ln] == self.dev[lane]])
        return self._of[key]


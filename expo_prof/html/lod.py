"""Level of detail: how much of the *other* work a timeline page draws.

Exponential instances are always drawn one by one. Everything else is drawn
as individual named events while that stays cheap, and otherwise merged into
busy intervals per lane:

1. lanes are taken smallest first while their events fit ``detail_budget``:
   those lanes keep every event (name, hover);
2. the remaining lanes are merged into busy intervals (union per lane:
   nested and overlapping events become one interval);
3. when even the merged intervals exceed ``busy_budget``, the smallest gaps
   between them are closed (one global threshold) until they fit: the page
   then shows "busy at this resolution", and says so.

The budgets bound the file size and the drawing time whatever the trace
holds (bench/bench_html.py measures both against event count).

Closing gaps (step 3) would make a lane look busier than it was. So for
each merged lane whose gaps were closed, the page also gets the *exact*
busy time per bin of a fixed grid (:data:`COVER_BINS` bins over the whole
span, from the union before any gap was closed). Wherever a screen pixel is
at least one bin wide the page draws busy time as that exact share; only
zoomed in further does it draw the merged intervals (and says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from expo_prof.analysis import intervals as iv
from expo_prof.words import fmt_ns

#: Individual events drawn with names (all lanes together).
DETAIL_BUDGET = 120_000
#: Merged busy intervals drawn (all merged lanes together).
BUSY_BUDGET = 150_000
#: Bins of the exact busy-share grid of each gap-closed lane (about 12 screens wide at 1400 px).
COVER_BINS = 16_384


@dataclass
class Detail:
    """The decision for one set of lanes, and the intervals to draw for the merged ones."""

    detailed_lanes: set[int]
    busy_lane: np.ndarray  # int64, lane of each merged interval
    busy_start: np.ndarray
    busy_end: np.ndarray
    events_in: int  # events considered
    merged_events: int  # events that went into busy intervals
    gap_closed_ns: int  # 0, or gaps shorter than this were closed
    notes: list[str] = field(default_factory=list)
    #: Exact busy ns per bin of ``cover_bin_ns`` from 0, for each gap-closed lane (empty when none was closed).
    cover: dict[int, np.ndarray] = field(default_factory=dict)
    cover_bin_ns: int = 0

    def describe(self) -> str:
        """One line for the page: what was drawn how."""
        if self.merged_events == 0:
            return f"all {self.events_in:,} events drawn individually"
        s = (
            f"{self.events_in - self.merged_events:,} events drawn individually; "
            f"{self.merged_events:,} merged into {len(self.busy_start):,} busy intervals"
        )
        if self.gap_closed_ns:
            s += f" (gaps under {fmt_ns(self.gap_closed_ns)} closed)"
        return s


def choose(
    lane: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    *,
    detail_budget: int = DETAIL_BUDGET,
    busy_budget: int = BUSY_BUDGET,
    span_ns: int | None = None,
    cover_bins: int = COVER_BINS,
) -> Detail:
    """Pick detailed lanes and merge the rest (see the module docstring)."""
    lane = np.asarray(lane, dtype=np.int64)
    n = len(lane)
    if n == 0:
        z = np.empty(0, np.int64)
        return Detail(set(), z, z, z, 0, 0, 0)
    ids, counts = np.unique(lane, return_counts=True)
    order = np.argsort(counts, kind="stable")
    cum = np.cumsum(counts[order])
    detailed = {int(x) for x in ids[order][cum <= detail_budget]}
    merge_m = ~np.isin(lane, list(detailed)) if detailed else np.ones(n, dtype=bool)
    rows = np.flatnonzero(merge_m)
    unions = iv.lane_unions(lane[rows], start[rows], end[rows])
    bl = [np.full(len(u), ln, dtype=np.int64) for ln, u in sorted(unions.items())]
    bs = [u.start for _, u in sorted(unions.items())]
    be = [u.end for _, u in sorted(unions.items())]
    busy_lane = np.concatenate(bl) if bl else np.empty(0, np.int64)
    busy_start = np.concatenate(bs) if bs else np.empty(0, np.int64)
    busy_end = np.concatenate(be) if be else np.empty(0, np.int64)
    gap_closed = 0
    cover: dict[int, np.ndarray] = {}
    bin_ns = 0
    if len(busy_start) > busy_budget:
        merged = coarsen(busy_lane, busy_start, busy_end, busy_budget)
        span = int(span_ns if span_ns is not None else busy_end.max())
        bin_ns = max(1, -(-max(span, 1) // cover_bins))
        edges = np.arange(cover_bins + 1, dtype=np.int64) * bin_ns
        before = np.bincount(busy_lane, minlength=int(busy_lane.max()) + 1)
        after = np.bincount(merged[0], minlength=len(before))
        for ln, u in sorted(unions.items()):
            if after[ln] < before[ln]:  # this lane's gaps were closed: keep its exact busy time per bin
                cover[int(ln)] = np.diff(iv.covered_before(u, edges))
        busy_lane, busy_start, busy_end, gap_closed = merged
    return Detail(detailed, busy_lane, busy_start, busy_end, n, len(rows), gap_closed, cover=cover, cover_bin_ns=bin_ns)


def coarsen(lane: np.ndarray, start: np.ndarray, end: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Close the smallest gaps between consecutive intervals of a lane until at most ``budget`` remain.

    Input: per-lane disjoint sorted intervals, grouped by lane. Returns the
    merged intervals and the gap length below which gaps were closed.
    """
    n = len(start)
    same = lane[1:] == lane[:-1]
    gaps = np.where(same, start[1:] - end[:-1], np.iinfo(np.int64).max)
    need = n - max(budget, int((~same).sum()) + 1)
    if need <= 0:
        return lane, start, end, 0
    thr = int(np.partition(gaps, need - 1)[need - 1])
    close = gaps <= thr
    new = np.concatenate(([True], ~close))
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, n - 1)
    return lane[first], start[first], end[last], thr + 1

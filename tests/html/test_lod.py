"""Level of detail: budgets hold, merging keeps the busy time, coarsening only closes small gaps."""

from __future__ import annotations

import numpy as np

from expo_prof import readers
from expo_prof.analysis import intervals as iv
from expo_prof.html import lod


def _cols(path):
    tl = readers.load([path]).timelines[0]
    return tl, tl.lane.astype(np.int64), tl.start, tl.end


def test_small_trace_is_drawn_in_full(nccl_trace):
    """GIVEN a real trace under the detail budget WHEN the level of detail is chosen THEN every lane keeps its events."""
    tl, lane, s, e = _cols(nccl_trace)
    d = lod.choose(lane, s, e, detail_budget=len(tl))
    assert d.detailed_lanes == set(np.unique(lane).tolist()) and d.merged_events == 0 and len(d.busy_start) == 0


def test_lanes_over_budget_merge_smallest_first_and_keep_busy_time(nccl_trace):
    """GIVEN a real multi-lane trace and a detail budget smaller than it WHEN the level of detail is chosen
    THEN the smallest lanes stay detailed within the budget, the others merge into busy intervals covering
    exactly their union (no coarsening needed)."""
    tl, lane, s, e = _cols(nccl_trace)
    budget = len(tl) // 3
    d = lod.choose(lane, s, e, detail_budget=budget)
    ids, counts = np.unique(lane, return_counts=True)
    kept = sum(int(c) for i, c in zip(ids, counts) if int(i) in d.detailed_lanes)
    assert 0 < kept <= budget and d.merged_events == len(tl) - kept
    assert max(c for i, c in zip(ids, counts) if int(i) in d.detailed_lanes) <= min(
        c for i, c in zip(ids, counts) if int(i) not in d.detailed_lanes)
    for ln in set(ids.tolist()) - d.detailed_lanes:
        m = lane == ln
        want = iv.union(s[m], e[m])
        got = d.busy_lane == ln
        assert np.array_equal(d.busy_start[got], want.start) and np.array_equal(d.busy_end[got], want.end)
    assert d.gap_closed_ns == 0


def test_coarsening_meets_busy_budget_and_covers_all_work(vllm_cpu_trace):
    """GIVEN a real trace merged under a small busy budget WHEN gaps are closed THEN at most the budget of
    intervals remain, they cover every original event, and no closed gap was longer than the reported one."""
    tl, lane, s, e = _cols(vllm_cpu_trace)
    d = lod.choose(lane, s, e, detail_budget=0, busy_budget=100)
    assert 0 < len(d.busy_start) <= 100 and d.gap_closed_ns > 0
    full = iv.union(s, e)
    coarse = iv.Union(d.busy_start, d.busy_end)
    assert iv.intersection(full, coarse).measure == full.measure
    added = coarse.measure - full.measure
    assert added <= (len(full) - len(coarse)) * d.gap_closed_ns
    assert "closed" in d.describe()


def test_gap_closed_lanes_keep_their_exact_busy_time_per_bin(nccl_trace):
    """GIVEN a real trace merged with a busy budget so small that gaps must be closed
    WHEN the level of detail is chosen THEN every gap-closed lane carries a per-bin grid whose bins add up to
    that lane's exact (unclosed) busy time, each bin to the union's time inside it, and no bin exceeds its width."""
    tl, lane, s, e = _cols(nccl_trace)
    s0 = s - s.min()
    e0 = e - s.min()
    span = int(e0.max())
    d = lod.choose(lane, s0, e0, detail_budget=0, busy_budget=50, span_ns=span, cover_bins=512)
    assert d.gap_closed_ns > 0 and d.cover and d.cover_bin_ns * 512 >= span
    for ln, bins in d.cover.items():
        m = lane == ln
        u = iv.union(s0[m], e0[m])
        assert int(bins.sum()) == int((u.end - u.start).sum())
        assert int(bins.max()) <= d.cover_bin_ns
        k = int(np.argmax(bins))
        assert int(bins[k]) == int(iv.coverage(u, np.array([k * d.cover_bin_ns]), np.array([(k + 1) * d.cover_bin_ns]))[0])
    # lanes whose intervals were left as they were carry no grid
    assert d.cover.keys() <= set(np.unique(d.busy_lane).tolist())

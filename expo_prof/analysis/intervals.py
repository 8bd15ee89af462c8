"""Exact interval arithmetic on int64 nanoseconds (numpy, O(n log n)).

Intervals are half-open ``[start, end)`` pairs of int64 arrays. Everything here
is integer arithmetic, so results are exact: touching intervals (``a.end ==
b.start``) neither double count nor leave a gap, nested intervals count once,
and zero-length intervals contribute nothing.

The two building blocks:

* :func:`union` — sort by start and merge overlapping / touching intervals into
  disjoint, sorted intervals (one ``argsort`` plus linear passes).
* :func:`coverage` — for each query interval, the length of its intersection
  with a union: a prefix sum over the merged lengths gives ``F(t)`` = measure
  of ``union ∩ (-inf, t)`` at any ``t`` through one ``searchsorted``; the
  coverage of ``[a, b)`` is ``F(b) - F(a)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from expo_prof.analysis.arrays import distinct

_I64 = np.int64


@dataclass(frozen=True)
class Union:
    """Disjoint, sorted, non-touching intervals ``[start[i], end[i])`` with ``end[i] < start[i+1]``."""

    start: np.ndarray
    end: np.ndarray

    @classmethod
    def empty(cls) -> Union:
        return cls(np.empty(0, _I64), np.empty(0, _I64))

    def __len__(self) -> int:
        return len(self.start)

    @property
    def measure(self) -> int:
        """Total length covered (ns)."""
        return int((self.end - self.start).sum())


def union(start: np.ndarray, end: np.ndarray) -> Union:
    """Merge ``[start[i], end[i])`` into disjoint sorted intervals.

    Overlapping, nested and touching intervals merge; empty ones (``end <=
    start``) are dropped. O(n log n) for the sort, O(n) otherwise.
    """
    start = np.asarray(start, dtype=_I64)
    end = np.asarray(end, dtype=_I64)
    if start.shape != end.shape:
        raise ValueError("start and end must have the same shape")
    keep = end > start
    if not keep.all():
        start, end = start[keep], end[keep]
    if len(start) == 0:
        return Union.empty()
    if (start[1:] >= start[:-1]).all():
        s, e = start, end  # already in order (a trace's events mostly are): no sort, no copy
        if (s[1:] > e[:-1]).all():
            return Union(s, e)  # and apart already (one thread's top-level ops): nothing to merge
    else:
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
    first, ends = _merge_sorted(s, e)
    return Union(s[first], ends)


def _merge_sorted(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-empty intervals sorted by start, merged: ``(first, ends)`` — the index of each merged interval's
    first interval (its start is ``s[first]``) and its end."""
    reach = np.maximum.accumulate(e)  # furthest end seen so far
    # A new group begins where an interval starts strictly after everything
    # before it has ended (start == previous reach touches, so it merges).
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = len(s) - 1
    return first, reach[last]


def union_of(*unions: Union) -> Union:
    """Union of several unions (one is its own union: returned as it is, no sort)."""
    if not unions:
        return Union.empty()
    if len(unions) == 1:
        return unions[0]
    return union(np.concatenate([u.start for u in unions]), np.concatenate([u.end for u in unions]))


def covered_before(u: Union, t: np.ndarray) -> np.ndarray:
    """``F(t)``: measure of ``u ∩ (-inf, t)`` for each ``t`` (int64 array)."""
    t = np.asarray(t, dtype=_I64)
    if len(u) == 0:
        return np.zeros(t.shape, dtype=_I64)
    lengths = u.end - u.start
    before = np.concatenate(([0], np.cumsum(lengths)))  # before[k] = sum of lengths of intervals < k
    # k = index of the last interval starting at or before t (-1: none).
    k = np.searchsorted(u.start, t, side="right") - 1
    kc = np.clip(k, 0, None)
    partial = np.clip(t - u.start[kc], 0, lengths[kc])
    return np.where(k >= 0, before[kc] + partial, 0)


def coverage(u: Union, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Length of ``[start[i], end[i]) ∩ u`` for each query interval (int64 ns).

    Queries may overlap each other and need not be sorted. Empty or inverted
    queries get 0.
    """
    start = np.asarray(start, dtype=_I64)
    end = np.asarray(end, dtype=_I64)
    end = np.maximum(end, start)
    return covered_before(u, end) - covered_before(u, start)


def _overlapping(a: Union, b: Union) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of an ``a`` and a ``b`` interval that overlap: ``(owner, k, first)`` — the index in ``a``, the
    index in ``b``, and whether it is the first pair of its ``a`` interval; sorted by both indices at once (of
    two disjoint sorted sets the overlapping pairs form a staircase).

    The smaller set is searched in the larger (two ``searchsorted``), then one ``repeat``: no sweep over both.
    """
    flip = len(b) <= len(a)
    x, y = (b, a) if flip else (a, b)  # the intervals of x are looked up among those of y
    k0 = np.searchsorted(y.end, x.start, side="right")  # first y interval ending after x's start
    k1 = np.searchsorted(y.start, x.end, side="left")  # y intervals starting before x's end
    cnt = np.maximum(k1 - k0, 0)
    xi = np.repeat(np.arange(len(x), dtype=_I64), cnt)
    yi = np.repeat(k0, cnt) + np.arange(len(xi), dtype=_I64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    owner, k = (yi, xi) if flip else (xi, yi)
    first = np.ones(len(owner), dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    return owner.astype(_I64), k.astype(_I64), first


def intersection(a: Union, b: Union) -> Union:
    """The intervals covered by both ``a`` and ``b`` (disjoint, sorted)."""
    if len(a) == 0 or len(b) == 0:
        return Union.empty()
    owner, k, _ = _overlapping(a, b)
    s = np.maximum(a.start[owner], b.start[k])
    e = np.minimum(a.end[owner], b.end[k])
    # Pieces of one a interval are apart by b's gaps, of two by a's gaps: disjoint, sorted, never touching.
    keep = e > s
    return Union(s[keep], e[keep])


def subtract(a: Union, b: Union) -> Union:
    """``a`` minus ``b`` (disjoint, sorted)."""
    if len(a) == 0 or len(b) == 0:
        return a
    owner, k, first = _overlapping(a, b)
    last = np.ones(len(owner), dtype=bool)
    last[:-1] = owner[:-1] != owner[1:]
    # The pieces of each a interval that b overlaps: the gap before each overlapping b interval, in order, and
    # the part after the last one; ``seq`` puts them in that order (pairs come sorted by a interval).
    tails = np.flatnonzero(last)
    ps = np.concatenate((np.where(first, a.start[owner], b.end[k - 1]), b.end[k[tails]]))
    pe = np.concatenate((b.start[k], a.end[owner[tails]]))
    po = np.concatenate((owner, owner[tails]))
    seq = np.concatenate((2 * np.arange(len(owner)), 2 * tails + 1))
    o = np.argsort(seq, kind="stable")
    ps, pe, po = ps[o], pe[o], po[o]
    keep = pe > ps
    ps, pe, po = ps[keep], pe[keep], po[keep]
    if len(po) < 2 or bool((po[1:] != po[:-1]).all()):
        return _replace_pieces(a, owner[first], ps, pe, po)
    return _place_pieces(a, owner, ps, pe, po)


def _replace_pieces(a: Union, touched: np.ndarray, ps: np.ndarray, pe: np.ndarray, po: np.ndarray) -> Union:
    """``a`` with each ``touched`` interval replaced by its piece (``ps``, ``pe`` of owner ``po``: at most one
    an owner), or removed where it has none. The common case — b's intervals trim a's ends, or lie inside
    intervals of their own (a trace's busy time minus the draws it holds) — in copies and a few small index
    operations, where placing pieces (:func:`_place_pieces`) indexes every interval of ``a``."""
    s, e = a.start.copy(), a.end.copy()
    s[po], e[po] = ps, pe
    gone = touched[~np.isin(touched, po, assume_unique=True)]
    if len(gone):
        keep = np.ones(len(a), dtype=bool)
        keep[gone] = False
        s, e = s[keep], e[keep]
    return Union(s, e)


def _place_pieces(a: Union, owner: np.ndarray, ps: np.ndarray, pe: np.ndarray, po: np.ndarray) -> Union:
    """``a`` with every interval in ``owner`` replaced by its pieces (``ps``, ``pe`` of owner ``po``, in
    order; any number an owner, none included)."""
    # Untouched a intervals stay whole; a touched one is replaced by its pieces, in its place: no sort of a.
    touched = np.zeros(len(a), dtype=bool)
    touched[owner] = True
    count = (~touched).astype(_I64) + np.bincount(po, minlength=len(a))
    at = np.cumsum(count) - count
    s, e = np.empty(int(count.sum()), _I64), np.empty(int(count.sum()), _I64)
    free = np.flatnonzero(~touched)
    s[at[free]], e[at[free]] = a.start[free], a.end[free]
    slot = at[po] + _within(po)
    s[slot], e[slot] = ps, pe
    return Union(s, e)


def _within(groups: np.ndarray) -> np.ndarray:
    """Each element's position in its run of equal consecutive values (0, 1, … from each run's start)."""
    if len(groups) == 0:
        return np.empty(0, _I64)
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    return np.arange(len(groups), dtype=_I64) - np.repeat(starts, np.diff(np.append(starts, len(groups))))


def clip(u: Union, lo: int, hi: int) -> Union:
    """``u ∩ [lo, hi)``."""
    if len(u) == 0 or hi <= lo:
        return Union.empty()
    s = np.maximum(u.start, lo)
    e = np.minimum(u.end, hi)
    keep = e > s
    return Union(s[keep], e[keep])


def lane_unions(lane: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict[int, Union]:
    """Busy union per lane: ``{lane index: Union}`` of the given events."""
    lane = np.asarray(lane)
    out: dict[int, Union] = {}
    if len(lane) == 0:
        return out
    if (lane == lane[0]).all():  # one lane (a CPU trace's one thread): no sort, no split
        return {int(lane[0]): union(start, end)}
    order = np.argsort(lane, kind="stable")
    lane_s = lane[order]
    cuts = np.flatnonzero(np.diff(lane_s)) + 1
    for idx in np.split(order, cuts):
        out[int(lane[idx[0]])] = union(start[idx], end[idx])
    return out


#: The most ns :func:`measure_by_segment` lays its segments' stretches over (far inside int64).
STRETCH_LIMIT = float(2**62)


def measure_by_segment(seg: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, measures)``: each distinct ``seg`` id (sorted) and the measure of the union of its intervals.

    One sort for all segments, no loop per segment: each segment's intervals are
    moved onto a stretch of the time axis of their own (exact int64 offsets,
    a gap of 1 ns between stretches so touching never merges two segments), and
    the shifted intervals are merged as :func:`union` merges them (:func:`_merge_sorted`). A segment whose
    intervals are all empty measures 0.
    """
    seg = np.asarray(seg, dtype=_I64)
    start = np.asarray(start, dtype=_I64)
    end = np.asarray(end, dtype=_I64)
    if not (seg.shape == start.shape == end.shape):
        raise ValueError("seg, start and end must have the same shape")
    ids = distinct(seg)
    out = np.zeros(len(ids), dtype=_I64)
    keep = end > start
    seg, start, end = seg[keep], start[keep], end[keep]
    if len(seg) == 0:
        return ids, out
    order = np.lexsort((start, seg))
    seg, start, end = seg[order], start[order], end[order]
    first = np.flatnonzero(np.concatenate(([True], seg[1:] != seg[:-1])))
    lo = start[first]  # the earliest start of each segment (sorted by start within it)
    span = np.maximum.reduceat(end, first) - lo + 1
    if float(span.sum(dtype=np.float64)) >= STRETCH_LIMIT:
        # The stretches would not fit in int64 (segments spread over centuries of ns): merge per segment.
        for a, b in zip(first, np.append(first[1:], len(seg))):
            out[np.searchsorted(ids, seg[a])] = union(start[a:b], end[a:b]).measure
        return ids, out
    base = np.concatenate(([0], np.cumsum(span)[:-1]))
    where = np.repeat(np.arange(len(first)), np.diff(np.append(first, len(seg))))
    shift = base[where] - lo[where]
    s = start + shift
    g0, ends = _merge_sorted(s, end + shift)
    per = np.add.reduceat(ends - s[g0], np.searchsorted(g0, first))
    out[np.searchsorted(ids, seg[first])] = per
    return ids, out

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
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = end[order]
    reach = np.maximum.accumulate(e)  # furthest end seen so far
    # A new group begins where an interval starts strictly after everything
    # before it has ended (start == previous reach touches, so it merges).
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return Union(s[first], reach[last])


def union_of(*unions: Union) -> Union:
    """Union of several unions."""
    if not unions:
        return Union.empty()
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


def intersection(a: Union, b: Union) -> Union:
    """The intervals covered by both ``a`` and ``b`` (disjoint, sorted)."""
    if len(a) == 0 or len(b) == 0:
        return Union.empty()
    # Sweep over all boundaries: depth 2 means inside both.
    t = np.concatenate((a.start, a.end, b.start, b.end))
    d = np.concatenate((np.ones(len(a), np.int8), -np.ones(len(a), np.int8), np.ones(len(b), np.int8), -np.ones(len(b), np.int8)))
    # Ends before starts at equal times: half-open intervals that touch do not intersect.
    order = np.lexsort((d, t))
    t, d = t[order], d[order]
    depth = np.cumsum(d, dtype=np.int16)
    enter = np.flatnonzero(depth == 2)
    s = t[enter]
    e = t[enter + 1]
    return union(s, e)


def subtract(a: Union, b: Union) -> Union:
    """``a`` minus ``b`` (disjoint, sorted)."""
    if len(a) == 0 or len(b) == 0:
        return a
    # Complement of b inside the span of a, then intersect.
    lo = min(int(a.start[0]), int(b.start[0]))
    hi = max(int(a.end[-1]), int(b.end[-1]))
    gaps_s = np.concatenate(([lo], b.end))
    gaps_e = np.concatenate((b.start, [hi]))
    return intersection(a, union(gaps_s, gaps_e))


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
    order = np.argsort(lane, kind="stable")
    lane_s = lane[order]
    cuts = np.flatnonzero(np.diff(lane_s)) + 1
    for idx in np.split(order, cuts):
        out[int(lane[idx[0]])] = union(start[idx], end[idx])
    return out

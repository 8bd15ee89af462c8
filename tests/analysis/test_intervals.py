"""Interval arithmetic against a brute-force raster reference (hypothesis).

GIVEN random integer intervals on a small range (touching, nested, empty and
duplicated ones are likely at this size), WHEN they are merged / measured with
the numpy sweep, THEN every result equals counting covered integer points
``t`` with ``start <= t < end`` one by one.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof.analysis import intervals as iv

SPAN = 60


def _intervals(max_size: int = 25):
    return st.lists(
        st.tuples(st.integers(-5, SPAN), st.integers(0, 20)).map(lambda t: (t[0], t[0] + t[1])),
        max_size=max_size,
    )


def _arrays(pairs):
    s = np.array([p[0] for p in pairs], dtype=np.int64)
    e = np.array([p[1] for p in pairs], dtype=np.int64)
    return s, e


def _raster(pairs, lo=-10, hi=SPAN + 30) -> np.ndarray:
    """Covered unit cells [t, t+1) of the half-open intervals."""
    cells = np.zeros(hi - lo, dtype=bool)
    for s, e in pairs:
        cells[max(s, lo) - lo : max(min(e, hi), lo) - lo] = True
    return cells


def _raster_union(u: iv.Union, lo=-10, hi=SPAN + 30) -> np.ndarray:
    return _raster(list(zip(u.start.tolist(), u.end.tolist())), lo, hi)


@settings(max_examples=400, deadline=None)
@given(_intervals())
def test_union_matches_raster_and_is_canonical(pairs):
    # GIVEN random intervals WHEN merged
    u = iv.union(*_arrays(pairs))
    # THEN the same cells are covered, the measure is their count ...
    assert np.array_equal(_raster_union(u), _raster(pairs))
    assert u.measure == int(_raster(pairs).sum())
    # ... and the result is disjoint, sorted, non-touching and non-empty pieces.
    assert np.all(u.end > u.start)
    assert np.all(u.start[1:] > u.end[:-1])


@settings(max_examples=400, deadline=None)
@given(_intervals(), _intervals(12))
def test_coverage_matches_raster(busy, queries):
    # GIVEN a busy union and query intervals (overlapping, unsorted, some empty)
    u = iv.union(*_arrays(busy))
    qs, qe = _arrays(queries)
    # WHEN the coverage of each query is computed with prefix sums + searchsorted
    got = iv.coverage(u, qs, qe)
    # THEN it equals the count of covered cells inside each query
    cells = _raster(busy)
    lo = -10
    want = [int(cells[max(s, lo) - lo : max(e, s) - lo].sum()) for s, e in queries]
    assert got.tolist() == want


@settings(max_examples=300, deadline=None)
@given(_intervals(), _intervals())
def test_intersection_and_subtract_match_raster(a, b):
    ua, ub = iv.union(*_arrays(a)), iv.union(*_arrays(b))
    ra, rb = _raster(a), _raster(b)
    inter = iv.intersection(ua, ub)
    diff = iv.subtract(ua, ub)
    assert np.array_equal(_raster_union(inter), ra & rb)
    assert np.array_equal(_raster_union(diff), ra & ~rb)
    # the parts of a add up exactly: |a| = |a ∩ b| + |a \ b|
    assert ua.measure == inter.measure + diff.measure
    assert int(iv.coverage(ub, ua.start, ua.end).sum()) == inter.measure
    # ... and both are canonical unions (sorted, disjoint, not touching, no empty piece): merging changes nothing
    for u in (inter, diff):
        again = iv.union(u.start, u.end)
        assert u.start.tolist() == again.start.tolist() and u.end.tolist() == again.end.tolist()


@settings(max_examples=300, deadline=None)
@given(_intervals(), _intervals())
def test_subtract_replacing_single_pieces_equals_placing_them(a, b):
    """GIVEN two unions WHEN subtracted THEN the fast path taken when every touched interval of a keeps at most
    one piece (copies, issue 41) gives exactly what placing the pieces one by one gives."""
    ua, ub = iv.union(*_arrays(a)), iv.union(*_arrays(b))
    fast = iv.subtract(ua, ub)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(iv, "_replace_pieces", iv._place_pieces)
        placed = iv.subtract(ua, ub)
    assert fast.start.tolist() == placed.start.tolist() and fast.end.tolist() == placed.end.tolist()


def test_subtract_takes_both_paths():
    """GIVEN a b that trims one interval of a and splits another WHEN subtracted THEN both paths give the
    expected pieces (the split forces the general one, the trims alone the fast one)."""
    a = iv.union(np.array([0, 10, 20], dtype=np.int64), np.array([5, 15, 30], dtype=np.int64))
    trims = iv.union(np.array([3, 10], dtype=np.int64), np.array([5, 15], dtype=np.int64))
    splits = iv.union(np.array([3, 24], dtype=np.int64), np.array([5, 26], dtype=np.int64))
    t, s = iv.subtract(a, trims), iv.subtract(a, splits)
    assert list(zip(t.start.tolist(), t.end.tolist())) == [(0, 3), (20, 30)]
    assert list(zip(s.start.tolist(), s.end.tolist())) == [(0, 3), (10, 15), (20, 24), (26, 30)]


@settings(max_examples=200, deadline=None)
@given(_intervals(), st.integers(-5, SPAN), st.integers(0, 40))
def test_clip_matches_raster(a, lo, width):
    u = iv.union(*_arrays(a))
    c = iv.clip(u, lo, lo + width)
    window = np.zeros_like(_raster(a))
    window[lo + 10 : lo + width + 10] = True
    assert np.array_equal(_raster_union(c), _raster(a) & window)
    # AND the clipped union is still canonical: no empty piece where an interval only touches the window
    assert np.all(c.end > c.start) and np.all(c.start[1:] > c.end[:-1])
    assert c.start.dtype == c.end.dtype == np.int64


def test_clip_drops_intervals_that_only_touch_the_window():
    # GIVEN [0, 5) and [20, 30) WHEN clipped to [5, 20) (each touches one edge) THEN nothing is left
    u = iv.union(np.array([0, 20]), np.array([5, 30]))
    c = iv.clip(u, 5, 20)
    assert len(c) == 0 and c.measure == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-5, SPAN), st.integers(0, 20)), max_size=30))
def test_lane_unions_match_per_lane_raster(rows):
    # GIVEN events on a few lanes WHEN busy unions are built per lane
    lane = np.array([r[0] for r in rows], dtype=np.int32)
    s = np.array([r[1] for r in rows], dtype=np.int64)
    e = s + np.array([r[2] for r in rows], dtype=np.int64)
    per = iv.lane_unions(lane, s, e)
    # THEN each lane's union covers exactly that lane's cells
    assert set(per) == set(lane.tolist())
    for ln, u in per.items():
        mine = [(int(a), int(b)) for a, b, x in zip(s, e, lane) if x == ln]
        assert np.array_equal(_raster_union(u), _raster(mine))


def test_touching_and_nested_are_exact_at_epoch_nanoseconds():
    # GIVEN epoch-ns timestamps (beyond float64's exact integer range) that touch and nest
    t0 = 1_790_857_026_123_456_789
    s = np.array([t0, t0 + 5, t0 + 10, t0 + 1], dtype=np.int64)
    e = np.array([t0 + 5, t0 + 10, t0 + 11, t0 + 3], dtype=np.int64)
    # WHEN merged and queried
    u = iv.union(s, e)
    # THEN touching pieces merge into one, the nested one adds nothing, and no ns is lost
    assert u.start.tolist() == [t0] and u.end.tolist() == [t0 + 11]
    assert iv.coverage(u, np.array([t0 - 3, t0 + 10]), np.array([t0 + 1, t0 + 20])).tolist() == [1, 1]


def test_narrow_integer_inputs_are_widened_to_int64():
    # GIVEN int32 start/end arrays that touch, spanning -2e9 .. 2e9 (the span does not fit in int32)
    s = np.array([-2_000_000_000, 0], dtype=np.int32)
    e = np.array([0, 2_000_000_000], dtype=np.int32)
    # WHEN they are merged
    u = iv.union(s, e)
    # THEN the one piece is int64 ns and its length is exact (4e9 ns, not wrapped around int32)
    assert u.start.dtype == np.int64 and u.end.dtype == np.int64
    assert u.start.tolist() == [-2_000_000_000] and u.end.tolist() == [2_000_000_000]
    assert u.measure == 4_000_000_000


def test_coverage_of_an_empty_union_is_int64_zeros():
    # GIVEN nothing busy and two queries WHEN their coverage is computed
    got = iv.coverage(iv.Union.empty(), np.array([0, 5]), np.array([10, 7]))
    # THEN it is 0 ns for each, as int64 like every other coverage (callers add it into int64 totals)
    assert got.dtype == np.int64 and got.tolist() == [0, 0]


def test_covered_before_is_exact_int64_for_unsigned_epoch_times():
    # GIVEN epoch-ns busy pieces and query times held as uint64 (an unsigned column), past float64's exact range
    t0 = 1_790_857_026_123_456_789
    u = iv.union(np.array([t0, t0 + 20], dtype=np.int64), np.array([t0 + 7, t0 + 23], dtype=np.int64))
    t = np.array([t0 - 1, t0 + 3, t0 + 15, t0 + 21, t0 + 99], dtype=np.uint64)
    # WHEN F(t), the busy time before each t, is computed
    got = iv.covered_before(u, t)
    # THEN it is int64 and exact to the ns (uint64 - int64 arithmetic would go through float64)
    assert got.dtype == np.int64
    assert got.tolist() == [0, 3, 7, 8, 10]


def test_covered_before_an_empty_union_is_int64_zeros():
    # GIVEN nothing busy WHEN F(t) is asked for two times
    got = iv.covered_before(iv.Union.empty(), np.array([0, 5], dtype=np.int64))
    # THEN it is 0 for each, int64 like F(t) of any other union
    assert got.dtype == np.int64 and got.tolist() == [0, 0]


def test_union_of_unequal_starts_and_ends_is_refused_with_a_clear_message():
    # GIVEN two starts and one end WHEN a union is asked for THEN it is a ValueError that says why
    with pytest.raises(ValueError, match=r"^start and end must have the same shape$"):
        iv.union(np.array([1, 2]), np.array([3]))

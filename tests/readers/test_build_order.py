"""The Timeline builder's event order (expo_prof/readers/builder.py ``_order``) against ``np.lexsort``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof.readers.builder import _order


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=40), st.booleans())
def test_the_order_is_the_stable_lexsort_by_start_then_lane(rows, presorted):
    """GIVEN events with many equal starts across lanes, shuffled or already in order
    WHEN ordered THEN the permutation is ``np.lexsort((lane, start))`` (ties kept in file order), or None exactly
    when that permutation is the identity."""
    start = np.array([r[0] for r in rows], dtype=np.int64)
    lane = np.array([r[1] for r in rows], dtype=np.int32)
    if presorted and len(rows):
        o = np.lexsort((lane, start))
        start, lane = start[o], lane[o]
    ref = np.lexsort((lane, start)) if len(rows) else np.zeros(0, dtype=np.int64)
    got = _order(start, lane)
    if got is None:
        assert np.array_equal(ref, np.arange(len(rows)))
    else:
        assert np.array_equal(got, ref) and not np.array_equal(ref, np.arange(len(rows)))

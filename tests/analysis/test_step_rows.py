"""The document's step rows from the columns (``steps.table.step_rows``: positional, shares divided on numpy)
against a reference built one row at a time, by keyword, with Python's int / int (issue 41)."""

from __future__ import annotations

import msgspec
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof.analysis.model import StepResult
from expo_prof.analysis.steps.table import NONE, StepTable, _window_index, concat, step_rows

# Small times, and times past 2**53 ns where a float64 no longer holds every integer (the Python path).
_NS = st.one_of(st.integers(0, 5_000), st.integers((1 << 53) - 2, (1 << 62)))
_OPT = st.one_of(st.just(NONE), st.integers(0, 4_000))


@st.composite
def _tables(draw) -> StepTable:
    n = draw(st.integers(0, 12))

    def ints(strategy) -> np.ndarray:
        return np.array(draw(st.lists(strategy, min_size=n, max_size=n)), dtype=np.int64)

    total = ints(_NS)
    hidden = np.array([draw(st.integers(0, int(x))) for x in total], dtype=np.int64)
    def objs(values: list) -> np.ndarray:  # an object column (the None appended keeps numpy from nesting)
        return np.array(draw(st.lists(st.sampled_from(values), min_size=n, max_size=n)) + [None], dtype=object)[:n]
    return StepTable(
        recording=objs(["r1", None]), rank=ints(st.integers(0, 3)), step=ints(_OPT), source=objs(["a", "b"]),
        start=ints(_NS), end=ints(_NS), instances=ints(st.integers(0, 9)), total=total, hidden=hidden,
        forward=ints(_NS), forward_known=np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool),
        wait=ints(_NS), wait_known=np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool),
        critical=ints(_NS), own=ints(st.one_of(_OPT, _NS)), cadence=ints(_OPT), kind=objs(["prefill", "decode", None]),
        reqs=ints(_OPT), tokens=ints(_OPT), q_rows=ints(_OPT), q_vocab=ints(_OPT), q_dtype=objs(["float32", None]),
    )


def _reference(t: StepTable) -> list[StepResult]:
    def opt(x: int) -> int | None:
        return None if x == NONE else x

    rows = []
    for i in range(len(t)):
        tot, hid, crit, own = (int(c[i]) for c in (t.total, t.hidden, t.critical, t.own))
        rows.append(StepResult(
            recording=t.recording[i], rank=int(t.rank[i]), step=opt(int(t.step[i])), source=t.source[i],
            start_ns=int(t.start[i]), end_ns=int(t.end[i]), instances=int(t.instances[i]), total_ns=tot,
            hidden_ns=hid, exposed_ns=tot - hid, hidden_fraction=hid / tot if tot > 0 else None,
            forward_ns=int(t.forward[i]) if t.forward_known[i] else None,
            wait_ns=int(t.wait[i]) if t.wait_known[i] else None, critical_ns=crit, wait_source=None,
            own_ns=opt(own), critical_share=crit / own if own > 0 else None, cadence_ns=opt(int(t.cadence[i])),
            kind=t.kind[i], reqs=opt(int(t.reqs[i])), tokens=opt(int(t.tokens[i])), q_rows=opt(int(t.q_rows[i])),
            q_vocab=opt(int(t.q_vocab[i])), q_dtype=t.q_dtype[i],
        ))
    return rows


@settings(max_examples=300, deadline=None)
@given(_tables())
def test_step_rows_equal_the_rows_built_one_by_one(t):
    # GIVEN step columns with unknown figures (NONE), zero totals and own times, and times past 2**53 ns
    # WHEN they become the document's rows THEN every field, its type and every float's bits are the reference's
    got, want = step_rows(t), _reference(t)
    assert msgspec.json.encode(got) == msgspec.json.encode(want)
    assert [[type(v) for v in msgspec.structs.astuple(r)] for r in got] == \
           [[type(v) for v in msgspec.structs.astuple(r)] for r in want]


def test_shares_past_2_to_the_53_ns_are_pythons_division():
    # GIVEN sums past 2**53 ns, where float64 division of the rounded integers differs from Python's int / int
    big = 1 << 53
    hid, tot, crit, own = [big + 1, 1, 5], [big + 3, big + 1, 7], [1, big + 1, 3], [big + 1, big + 3, 4]
    n = len(tot)
    def col(v) -> np.ndarray:
        return np.array(v, dtype=np.int64)
    t = StepTable(
        recording=np.array([None] * n, dtype=object), rank=col([0] * n), step=col(range(n)),
        source=np.array(["a"] * n, dtype=object), start=col([0] * n), end=col([1] * n), instances=col([1] * n),
        total=col(tot), hidden=col(hid), forward=col([0] * n), forward_known=np.zeros(n, bool), wait=col([0] * n),
        wait_known=np.zeros(n, bool), critical=col(crit), own=col(own), cadence=col([NONE] * n),
        kind=np.array([None] * n, dtype=object), reqs=col([NONE] * n), tokens=col([NONE] * n),
        q_rows=col([NONE] * n), q_vocab=col([NONE] * n), q_dtype=np.array([None] * n, dtype=object),
    )
    assert (big + 1) / (big + 3) != float(np.float64(big + 1) / np.float64(big + 3))  # the case is a real one
    # WHEN they become rows THEN each share is Python's correctly rounded quotient of the exact integers
    rows = step_rows(t)
    assert [r.hidden_fraction for r in rows] == [h / x for h, x in zip(hid, tot)]
    assert [r.critical_share for r in rows] == [c / o for c, o in zip(crit, own)]
    assert msgspec.json.encode(rows) == msgspec.json.encode(_reference(t))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-1, 6), max_size=12), st.lists(st.integers(-2, 8), max_size=12))
def test_window_index_is_the_last_window_of_each_id(win_ids, ids):
    # GIVEN window ids (some repeated) and the ids looked up (some without a window)
    # WHEN each id's window is found THEN it is the last window of that id, -1 where none, as a dict built in order
    last = {i: j for j, i in enumerate(win_ids)}
    got = _window_index(np.array(win_ids, dtype=np.int64), np.array(ids, dtype=np.int64))
    assert got.tolist() == [last.get(i, -1) for i in ids]


def test_take_of_every_row_in_order_and_concat_of_one_table_copy_nothing():
    # GIVEN a table of three rows, in order
    t = concat([_one_row(i) for i in range(3)])
    # WHEN every row is taken in order (by index or mask) or one table is concatenated THEN it is the table itself
    assert t.take(np.arange(3)) is t and t.take(np.ones(3, bool)) is t and concat([t]) is t
    # AND any other selection is a new table with those rows
    assert t.take(np.array([2, 1, 0])).step.tolist() == [2, 1, 0]
    assert t.take(np.array([True, False, True])).step.tolist() == [0, 2]
    assert t.take(np.array([0, 1])).step.tolist() == [0, 1]


def _one_row(step: int) -> StepTable:
    def col(v) -> np.ndarray:
        return np.array([v], dtype=np.int64)

    def obj(v) -> np.ndarray:
        out = np.empty(1, dtype=object)
        out[0] = v
        return out

    return StepTable(
        recording=obj(None), rank=col(0), step=col(step), source=obj("a"), start=col(step), end=col(step + 1),
        instances=col(1), total=col(1), hidden=col(0), forward=col(0), forward_known=np.zeros(1, bool),
        wait=col(0), wait_known=np.zeros(1, bool), critical=col(1), own=col(NONE), cadence=col(NONE), kind=obj(None),
        reqs=col(NONE), tokens=col(NONE), q_rows=col(NONE), q_vocab=col(NONE), q_dtype=obj(None),
    )

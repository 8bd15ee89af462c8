"""The step rows of a rank, column-wise: what ``steps[]`` holds, computed over numpy columns.

:func:`step_table` rolls one analysed Timeline up into one row per step (and one row for the draws outside any
step) with one sort and a few segmented reductions: no Python loop per step or per instance, so a trace of
tens of thousands of steps costs a few microseconds a step. The rows become
:class:`~expo_prof.analysis.model.StepResult` objects only for the document (:func:`step_rows`); every sum,
mean and distribution over steps is taken on the columns (:mod:`expo_prof.analysis.steps.means`).

A column that a source cannot fill holds :data:`NONE` (``-1``; ``None`` in the document): no own time,
cadence, batch, tokens or q is ever negative. ``forward`` / ``wait`` are all known or all unknown per table
(``forward_known`` / ``wait_known``), as the document says them per rank.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from itertools import repeat, starmap

import numpy as np

from expo_prof.analysis.model import StepResult
from expo_prof.analysis.steps.facts import StepFacts
from expo_prof.analysis.steps.facts import _index as index_of

#: A figure the source does not give (None in the document).
NONE = -1
_I64 = np.int64


@dataclass
class StepTable:
    """Step rows, column-wise (one entry per row, in row order)."""

    recording: np.ndarray  # object: the recording label or None
    rank: np.ndarray  # int64
    step: np.ndarray  # int64; NONE: the row of draws outside any step
    source: np.ndarray  # object
    start: np.ndarray  # int64 ns
    end: np.ndarray
    instances: np.ndarray
    total: np.ndarray
    hidden: np.ndarray
    forward: np.ndarray  # int64; meaningful where forward_known
    forward_known: np.ndarray  # bool
    wait: np.ndarray
    wait_known: np.ndarray  # bool
    critical: np.ndarray
    own: np.ndarray  # NONE: not known
    cadence: np.ndarray
    kind: np.ndarray  # object: "prefill", "decode" or None
    reqs: np.ndarray
    tokens: np.ndarray
    q_rows: np.ndarray
    q_vocab: np.ndarray
    q_dtype: np.ndarray  # object

    def __len__(self) -> int:
        return len(self.step)

    def take(self, idx: np.ndarray) -> StepTable:
        """The rows ``idx`` (an index array or a mask), in that order; the table itself when that is every row
        in order (a rank's rows mostly come sorted: no copy of every column)."""
        idx = np.asarray(idx)
        if len(idx) == len(self) and (idx.all() if idx.dtype == bool else (idx == np.arange(len(idx))).all()):
            return self
        return StepTable(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

    @property
    def numbered(self) -> np.ndarray:
        """Mask of the rows that are steps (a step id); the row of draws outside any step is not one."""
        return self.step >= 0


def empty_table() -> StepTable:
    """A table of no rows."""
    z, o, b = np.empty(0, _I64), np.empty(0, object), np.empty(0, bool)
    return StepTable(o, z, z, o, z, z, z, z, z, z, b, z, b, z, z, z, o, z, z, z, z, o)


def concat(tables: list[StepTable]) -> StepTable:
    """The rows of ``tables`` one after the other."""
    if not tables:
        return empty_table()
    if len(tables) == 1:  # one part (most ranks): its rows as they are, no copy of every column
        return tables[0]
    return StepTable(**{f.name: np.concatenate([getattr(t, f.name) for t in tables]) for f in fields(StepTable)})


def lookup(d: dict[int, int], ids: np.ndarray, default: int = NONE) -> np.ndarray:
    """``d[i]`` for each of ``ids`` (int64), ``default`` where absent: one sort of the keys, one search
    (:func:`~expo_prof.analysis.steps.facts._index`)."""
    return _Keys(np.asarray(ids, dtype=_I64)).ints(d, default)


class _Keys:
    """Where each step id sits among the keys of the per-step dicts (the facts', the analysis's): found once per
    distinct key sequence — most of the dicts share theirs — and each dict's values then taken by position."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids
        self._found: list[tuple[np.ndarray, np.ndarray]] = []

    def _pos(self, d: Mapping[int, object]) -> np.ndarray:
        keys = np.fromiter(d.keys(), _I64, len(d))
        for k, pos in self._found:
            if np.array_equal(k, keys):
                return pos
        pos = index_of(keys, self.ids)
        self._found.append((keys, pos))
        return pos

    def ints(self, d: Mapping[int, object], default: int = NONE, values: tuple | None = None) -> np.ndarray:
        """``d[i]`` for each step id, ``default`` where absent; ``values``: d's values transformed, in d's
        order (instead of d's own)."""
        if not d:
            return np.full(len(self.ids), default, _I64)
        pos = self._pos(d)
        vals = np.fromiter(d.values() if values is None else values, _I64, len(d))
        return np.where(pos >= 0, vals[np.clip(pos, 0, None)], default)

    def objects(self, d: Mapping[int, object], values: tuple | None = None) -> np.ndarray:
        """``d.get(i)`` for each step id as an object column (None where absent); ``values``: d's values
        transformed, in d's order (instead of d's own)."""
        out = np.full(len(self.ids), None, dtype=object)
        if d:
            pos = self._pos(d)
            vals = np.empty(len(d), dtype=object)
            vals[:] = list(d.values() if values is None else values)
            out[pos >= 0] = vals[pos[pos >= 0]]
        return out


def step_table(a, run: str | None = None, *, wait: bool = True, forward: bool = True) -> StepTable:
    """One row per step of ``a`` (a :class:`~expo_prof.analysis.overlap.hidden.TimelineAnalysis`) that holds
    instances, the row of instances outside any step (``step`` NONE) included; sorted by step id."""
    n = len(a)
    if n == 0:
        return empty_table()
    order = np.argsort(a.step, kind="stable")
    sid_sorted = a.step[order]
    first = np.flatnonzero(np.concatenate(([True], sid_sorted[1:] != sid_sorted[:-1])))
    ids = sid_sorted[first].astype(_I64)
    m = len(ids)
    total = np.add.reduceat(a.total[order], first).astype(_I64)
    hidden = np.add.reduceat(a.hidden[order], first).astype(_I64)
    count = np.diff(np.append(first, n)).astype(_I64)
    # The step's window; where no window has the id (the row outside any step), its instances' extent.
    start = np.minimum.reduceat(a.inst.start[order], first).astype(_I64)
    end = np.maximum.reduceat(a.inst.end[order], first).astype(_I64)
    win = _window_index(a.steps.ids, ids)
    has = win >= 0
    start[has] = a.steps.start[win[has]]
    end[has] = a.steps.end[win[has]]
    at = _Keys(ids)
    w = at.ints(a.wait_by_step, 0)
    exposed = total - hidden
    critical = _critical(a, ids, exposed, w if wait else None)
    f: StepFacts = a.facts
    numbered = ids >= 0
    own = np.where(numbered, at.ints(f.own_ns), NONE)
    q = f.q
    q_rows, q_vocab, q_dtype = (np.full(m, NONE, _I64), np.full(m, NONE, _I64), np.full(m, None, dtype=object))
    if q:
        rows_, vocab_, dtype_ = zip(*q.values())
        q_rows, q_vocab, q_dtype = at.ints(q, values=rows_), at.ints(q, values=vocab_), at.objects(q, dtype_)
    q_rows, q_vocab = np.where(numbered, q_rows, NONE), np.where(numbered, q_vocab, NONE)
    q_dtype[~numbered] = None
    kind = at.objects(f.kind)
    kind[~numbered] = None
    return StepTable(
        recording=np.full(m, run, dtype=object),
        rank=np.full(m, a.tl.rank, dtype=_I64),
        step=np.where(numbered, ids, NONE),
        source=np.full(m, a.tl.source, dtype=object),
        start=start,
        end=end,
        instances=count,
        total=total,
        hidden=hidden,
        forward=at.ints(a.forward_by_step, 0),
        forward_known=np.full(m, forward),
        wait=w,
        wait_known=np.full(m, wait),
        critical=critical,
        own=own,
        cadence=np.where(numbered, at.ints(f.cadence_ns), NONE),
        kind=kind,
        reqs=np.where(numbered, at.ints(f.reqs), NONE),
        tokens=np.where(numbered, at.ints(f.tokens), NONE),
        q_rows=q_rows,
        q_vocab=q_vocab,
        q_dtype=q_dtype,
    )


def _window_index(win_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Position of each of ``ids`` among the step windows' ids (the last window of an id), -1 when none."""
    # Ids are unique per window in practice; were one repeated, the last window wins: index_of finds the first
    # of equal ids (a stable sort), so it searches the ids reversed.
    rev = np.asarray(win_ids, dtype=_I64)[::-1]
    pos = index_of(rev, np.asarray(ids, dtype=_I64))
    return np.where(pos >= 0, len(rev) - 1 - pos, -1)


def _critical(a, ids: np.ndarray, exposed: np.ndarray, wait: np.ndarray | None) -> np.ndarray:
    """Each step's exposed ∪ wait time where the analysis measured it (its own waits: ``wait`` is
    ``a.wait_by_step``'s), else exposed + wait (waits mapped in from a log: the analysis measured no union)."""
    if a.critical_by_step is not None:
        measured = lookup(a.critical_by_step, ids, NONE)
        return np.where(measured == NONE, exposed, measured)
    return exposed + (0 if wait is None else wait)


def step_rows(t: StepTable) -> list[StepResult]:
    """The rows as the document's :class:`~expo_prof.analysis.model.StepResult` objects."""
    def opt(col: np.ndarray, known: np.ndarray | None = None) -> list:
        # Python ints (floats), and None where the source gave none
        unknown = (col == NONE) if known is None else ~known
        if not unknown.any():
            return col.tolist()
        out = col.astype(object)
        out[unknown] = None
        return out.tolist()

    exposed = t.total - t.hidden
    # The two shares divided on the columns: float64 division of integers under 2**53 ns (104 days) is the
    # correctly rounded quotient, as Python's int / int is; a longer sum takes Python's division.
    if len(t) and max(int(t.total.max()), int(t.critical.max()), int(t.own.max())) >= 1 << 53:
        hid_frac = [h / n if n > 0 else None for h, n in zip(t.hidden.tolist(), t.total.tolist())]
        crit_share = [c / o if o > 0 else None for c, o in zip(t.critical.tolist(), t.own.tolist())]
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            hid_frac = opt(t.hidden / t.total, t.total > 0)
            crit_share = opt(t.critical / t.own, t.own > 0)
    # Positionally, in StepResult's field order (instances … wait_source, recording … q_dtype; its docstring),
    # by starmap: no Python frame per row, and six times faster than by keyword.
    return list(starmap(StepResult, zip(
        t.instances.tolist(), t.total.tolist(), t.hidden.tolist(), exposed.tolist(), hid_frac,
        opt(t.forward, t.forward_known), opt(t.wait, t.wait_known), t.critical.tolist(), repeat(None),
        t.recording.tolist(), t.rank.tolist(), opt(t.step), t.source.tolist(), t.start.tolist(), t.end.tolist(),
        opt(t.own), crit_share, opt(t.cadence), t.kind.tolist(), opt(t.reqs), opt(t.tokens), opt(t.q_rows),
        opt(t.q_vocab), t.q_dtype.tolist(),
    )))

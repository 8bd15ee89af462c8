"""One batch of decoded Chrome-trace events → numpy column chunks, without a per-event Python loop.

:mod:`expo_prof.readers.chrome.decode` decodes a few thousand events at a
time into small typed Structs; here every column is built by one list
comprehension over the batch (``[e.ts for e in evs]``) and numpy:

* each distinct ``(ph, cat, pid, tid)`` gets a small integer code
  (:class:`~expo_prof.readers.chrome.columns.CodeTable`; one tuple and one
  lookup per event, the costliest step per event after the decode itself), and
  what an event is (kept complete event, dropped category such as
  ``python_function``, flow, metadata, instant or counter) and its lane follow
  from its code through small per-code tables: numpy masks, no per-event branch;
* the kept events are picked with :func:`itertools.compress`, their names
  interned the same way, times converted exactly by
  :func:`~expo_prof.readers.chrome.columns.times_to_ns` (float µs once per
  file, by :func:`~expo_prof.readers.chrome.columns.cat_times`).

An event whose ``pid``/``tid``/``cat``/``name``/``id``/``Task Type`` is a
JSON object or array (unhashable) makes the batch go through
:func:`_hashable_only` first; such events are counted as ``malformed`` in
``dropped``.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress
from operator import attrgetter
from typing import Any

import numpy as np

from expo_prof.readers.chrome.columns import Cols, times_to_ns
from expo_prof.readers.chrome.filler import EMPTY_DROPPED as NO_PH
from expo_prof.readers.kinds import KINETO_CATS
from expo_prof.readers.long_names import LONG
from expo_prof.readers.timeparse import FLOAT_EXACT_LIMIT_US

try:  # the columns gathered in C (_gather.c; optional at install: without it the Python path below does it all)
    from expo_prof.readers.chrome import _gather
except ImportError:  # pragma: no cover - an install without a C compiler
    _gather = None  # type: ignore[assignment]

__all__ = ["DROP_CATS", "collect_events"]


#: Complete events dropped while decoding: Python frames (94 % of a with_stack
#: trace), the whole-trace span, profiler overhead, instants; and ``expo_prof_source``: the copy in an
#: ``expo-prof export`` of a source that was read but not counted (the overlay log beside a trace), which
#: reading the export back must not count a second time.
DROP_CATS = frozenset({"python_function", "Trace", "overhead", "cpu_instant_event", "Python", "python",
                       "expo_prof_source"})

#: Categories that only Kineto writes: their events carry no Ascend ``Task Type`` (torch_npu writes it on
#: device tasks without a ``cat``), so it is not looked for there.
_NO_TASK_CATS = frozenset(KINETO_CATS) | DROP_CATS
#: Categories whose events never carry ``args.correlation`` (Kineto writes it on kernels, copies, sets and
#: runtime/driver calls only; checked on every real trace in ../shared/realtraces): -1 without looking.
_NO_CORR_CATS = frozenset({"cpu_op", "Operator", "user_annotation", "gpu_user_annotation"}) | DROP_CATS

_PH = attrgetter("ph")
_KEY = ("ph", "cat", "pid", "tid")
#: More events than this in one batch (a chunk of 256 KB: events of under 16 bytes; a profiler's are 100+)
#: is filler: its events without ph are dropped before the columns even before the file has shown one.
_DENSE = 1 << 14

# What a ``ph`` value means here.
_PH_X, _PH_M, _PH_S, _PH_F, _PH_T, _PH_OTHER = range(6)
_PH_ROLE = {"X": _PH_X, "M": _PH_M, "s": _PH_S, "f": _PH_F, "t": _PH_T}


def collect_events(events: list[Any], c: Cols, redecode: Callable[[], list[Any] | None]) -> None:
    """Append the column chunks of decoded ``events`` to ``c``.

    ``redecode()`` decodes the same events again with ``ts``/``dur`` kept as
    number text (None when that fails); it is called only when a float time is
    too large to be exact.
    """
    c.n_seen += len(events)
    if NO_PH in c.dropped or len(events) > _DENSE:
        # The file has shown events without ph (never, in a profiler's trace), or this batch is too dense for
        # events that can count: events without ph are counted and dropped here, in C, instead of costing a key
        # and a lookup each (a hostile file of millions).
        phs = list(map(_PH, events))
        missing = phs.count(None)
        if missing:
            c.dropped[NO_PH] = c.dropped.get(NO_PH, 0) + missing
            events = list(compress(events, phs))
            full = redecode

            def redecode() -> list[Any] | None:
                again = full()
                return None if again is None else list(compress(again, phs))

    try:
        _columns(events, c, redecode)
    except TypeError:  # an unhashable pid/tid/cat/name/id: drop those events, then again
        kept = _hashable_only(events, c)
        sub = list(compress(events, kept))

        def redecode_sub() -> list[Any] | None:
            again = redecode()
            return None if again is None else list(compress(again, kept))

        _columns(sub, c, redecode_sub)


def _columns(ev: list[Any], c: Cols, redecode: Callable[[], list[Any] | None]) -> None:
    # Every step that can raise TypeError (an unhashable key) runs before the
    # first change to ``c`` other than new table entries, so a retry of the batch
    # counts nothing twice.
    if not ev:
        return
    # One code per distinct (ph, cat, pid, tid): what an event is and its lane follow from it.
    if _gather is not None:
        key = np.frombuffer(_gather.key_codes(ev, _KEY, c.evkey.ids), np.int32)
    else:
        key = c.evkey.codes([(e.ph, e.cat, e.pid, e.tid) for e in ev])
    t = _key_tables(c)
    # What the batch holds, per code (a few dozen, in Python): numpy calls cost microseconds each, a file has
    # hundreds of batches, and most batches need few of the per-event masks.
    counts = np.bincount(key, minlength=t.n).tolist()
    present = [i for i, k in enumerate(counts) if k]
    kept = [i for i in present if t.keep_l[i]]
    n_keep = sum(counts[i] for i in kept)
    all_kept = n_keep == len(ev)
    is_flow = t.flow[key] if any(t.flow_l[i] for i in present) else None
    flows = _flows(ev, is_flow, c, redecode) if is_flow is not None else None
    # A batch holding unexact float times is re-read as text once, for both parts.
    again = flows[-1] if flows is not None else None
    complete = None
    if n_keep:
        keep = None if all_kept else t.keep[key]
        kkey = key if keep is None else key[keep]
        if _gather is not None and not any(t.task_l[i] for i in kept):
            corr_all = all(t.corr_l[i] for i in kept)
            corr = (True if corr_all else None if not any(t.corr_l[i] for i in kept)
                    else t.corr[key] if keep is None else t.corr[key] & keep)
            complete = _complete_gathered(ev, keep, corr, c)
        if complete is None:
            complete = _complete(ev, keep, t.task[kkey], t.corr[kkey], c, redecode, again)

    dropped = c.dropped
    for i in present:
        if t.other_l[i]:
            ph, cat = t.ph_cat[i]
            what = cat if t.drop_l[i] else f"ph={ph}" if isinstance(ph, str) else "ph=?"
            dropped[what] = dropped.get(what, 0) + counts[i]
    if any(t.meta_l[i] for i in present):
        for i in np.flatnonzero(t.meta[key]).tolist():
            _metadata(ev[i], c)
    if flows is not None:
        fid, ts_ns, ts_bad, _ = flows
        fkey = key[is_flow]
        c.flow_id_col.append(fid)
        c.flow_ph.append(t.flow_ph[fkey])
        c.flow_cat.append(t.cat[fkey])
        c.flow_ts.append(ts_ns)
        c.flow_bad.append(ts_bad)
        c.flow_lane_col.append(t.flane[fkey])
    if complete is not None:
        name, task, corr_col, ts_ns, dur_ns, bad = complete
        c.ts.append(ts_ns)
        c.dur.append(dur_ns)
        c.bad.append(bad)
        c.lane_col.append(t.lane[kkey])
        c.name_col.append(name)
        c.cat_col.append(t.cat[kkey])
        c.task_col.append(task)
        c.corr.append(corr_col)


class KeyTables:
    """Per (ph, cat, pid, tid) code: what its events are, as numpy arrays indexed by the code.

    ``role`` (the phase's role), ``drop`` (a complete event of a dropped category), ``keep`` (a kept
    complete event), ``flow``, ``other`` (counted in ``dropped``: dropped categories, instants,
    counters…), ``meta`` (metadata), ``cat`` (code of the category), ``lane`` / ``flane`` (lane code of
    a kept complete / flow event, else -1), ``task`` / ``corr`` (its events may carry an Ascend
    ``Task Type`` / an ``args.correlation``), ``flow_ph`` (a flow event's phase: 0 s, 1 f, 2 t), ``ph_cat``
    (the code's ph and cat); ``keep_l``, ``flow_l``, ``other_l``, ``meta_l``, ``drop_l``, ``task_l``, ``corr_l``:
    the same as Python lists (a batch looks up the few codes it holds).
    """

    __slots__ = ("n", "role", "drop", "keep", "flow", "other", "meta", "cat", "lane", "flane", "task", "corr",
                 "flow_ph", "ph_cat", "keep_l", "flow_l", "other_l", "meta_l",
                 "drop_l", "task_l", "corr_l")

    def __init__(self, c: Cols) -> None:
        cats, lanes, flanes = c.cat.ids, c.lane.ids, c.flow_lane.ids
        role, drop, cat, lane, flane, task, corr = [], [], [], [], [], [], []
        for ph, ct, pid, tid in c.evkey.ids:
            r = _PH_ROLE.get(ph, _PH_OTHER) if type(ph) is str else _PH_OTHER
            dr = r == _PH_X and ct in DROP_CATS
            role.append(r)
            drop.append(dr)
            cat.append(cats.setdefault(ct, len(cats)))
            # Lanes numbered in the order their first kept event comes, as the key codes are.
            lane.append(lanes.setdefault((pid, tid), len(lanes)) if r == _PH_X and not dr else -1)
            flane.append(flanes.setdefault((pid, tid), len(flanes)) if _PH_S <= r <= _PH_T else -1)
            task.append(not (type(ct) is str and ct in _NO_TASK_CATS))
            corr.append(not (type(ct) is str and ct in _NO_CORR_CATS))
        self.n = len(role)
        self.role = np.array(role, dtype=np.int8)
        self.drop = np.array(drop, dtype=bool)
        self.keep = (self.role == _PH_X) & ~self.drop
        self.flow = (self.role >= _PH_S) & (self.role <= _PH_T)
        self.other = self.drop | (self.role == _PH_OTHER)
        self.meta = self.role == _PH_M
        self.cat = np.array(cat, dtype=np.int32)
        self.lane = np.array(lane, dtype=np.int32)
        self.flane = np.array(flane, dtype=np.int32)
        self.task = np.array(task, dtype=bool)
        self.corr = np.array(corr, dtype=bool)
        self.flow_ph = (self.role - _PH_S).astype(np.int8)  # a flow event's phase: 0 s, 1 f, 2 t
        self.ph_cat = [k[:2] for k in c.evkey.ids]
        self.keep_l, self.flow_l, self.other_l, self.meta_l = (
            self.keep.tolist(), self.flow.tolist(), self.other.tolist(), self.meta.tolist())
        self.drop_l, self.task_l, self.corr_l = self.drop.tolist(), self.task.tolist(), self.corr.tolist()


def _key_tables(c: Cols) -> KeyTables:
    """The :class:`KeyTables` of ``c``'s event keys, rebuilt when new keys came (a file has a few dozen)."""
    if c.key_tables is None or c.key_tables.n != len(c.evkey.ids):
        c.key_tables = KeyTables(c)
    return c.key_tables


def _complete(
    ev: list[Any],
    keep: np.ndarray | None,
    may_task: np.ndarray,
    may_corr: np.ndarray,
    c: Cols,
    redecode: Callable[[], list[Any] | None],
    again: list[Any] | None,
) -> tuple[np.ndarray, ...]:
    """Columns of the kept complete (``ph: X``) events (their lanes come from the key tables).

    ``keep`` marks the kept events (None: all of them); ``may_task`` / ``may_corr`` mark, per kept
    event, those whose ``Task Type`` / ``correlation`` is looked at (the others get -1).
    """
    keep_l = None if keep is None else keep.tolist()
    kev = ev if keep_l is None else list(compress(ev, keep_l))
    name = c.name.codes([e.name for e in kev])
    task = np.full(len(kev), -1, dtype=np.int32)
    corr = np.full(len(kev), -1, dtype=np.int64)
    try:  # events without args share one empty _Args
        if may_corr.all():
            corr = _corr([e.args.correlation for e in kev])
        elif may_corr.any():
            corr[may_corr] = _corr([e.args.correlation for e in compress(kev, may_corr.tolist())])
        if may_task.any():
            tt = [e.args.task_type for e in compress(kev, may_task.tolist())]
            if tt.count(None) != len(tt):
                task[may_task] = c.task.codes(tt)
    except AttributeError:  # "args": null
        args = [e.args for e in kev]
        corr = _corr([-1 if a is None else a.correlation for a in args])
        corr[~may_corr] = -1
        tt = [None if a is None else a.task_type for a in compress(args, may_task.tolist())]
        if tt.count(None) != len(tt):
            task[may_task] = c.task.codes(tt)
        del args
    ts = [e.ts for e in kev]
    dur = [e.dur for e in kev]
    del kev
    ts_ns, ts_bad = times_to_ns(ts, defer=True)
    dur_ns, dur_bad = times_to_ns(dur, defer=True)
    if (ts_bad.any() or dur_bad.any()) and (_needs_text(ts) or _needs_text(dur)):
        # Floats too large to be exact: take this batch's number text instead.
        again = again if again is not None else redecode()
        if again is not None:
            kev = again if keep_l is None else list(compress(again, keep_l))
            ts_ns, ts_bad = times_to_ns([e.ts for e in kev])
            dur_ns, dur_bad = times_to_ns([e.dur for e in kev])
    return name, task, corr, ts_ns, dur_ns, ts_bad | dur_bad


def _complete_gathered(ev: list[Any], keep: np.ndarray | None, corr: Any, c: Cols) -> tuple[np.ndarray, ...] | None:
    """:func:`_complete`'s columns gathered in C, for a batch whose kept events carry no Ascend ``Task Type``, when
    every value is of the plain kind (string names, int or exact float times, int correlations, no ``args:
    null``); None when one is not: the batch then takes the Python path, which finds the tables as they were.
    ``corr``: whose ``args.correlation`` is looked at (True: every kept event; a mask over all events; None: none).
    """
    got = _gather.complete(ev, keep, c.name.ids, LONG, FLOAT_EXACT_LIMIT_US, corr)
    if got is None:
        return None
    name, ts, dur, corr_col = got
    n = len(ts) // 8
    return (np.frombuffer(name, np.int32), np.full(n, -1, dtype=np.int32), np.frombuffer(corr_col, np.int64),
            np.frombuffer(ts, np.int64), np.frombuffer(dur, np.int64), np.zeros(n, dtype=bool))


def _flows(
    ev: list[Any], mask: np.ndarray, c: Cols, redecode: Callable[[], list[Any] | None]
) -> tuple[Any, ...]:
    """Columns of the flow (``ph`` s/f/t) events, plus the text re-decode if one was needed."""
    if _gather is not None:
        got = _gather.flows(ev, mask, FLOAT_EXACT_LIMIT_US)
        if got is not None:  # integer ids (Kineto's), plain times: as the lines below make them
            raw_id, raw_ts = got
            return np.frombuffer(raw_id, np.int64), np.frombuffer(raw_ts, np.int64), np.zeros(len(raw_ts) // 8, bool), None
    sel = mask.tolist()
    fev = list(compress(ev, sel))
    ids = [e.id for e in fev]
    # Integer ids (Kineto) stay raw and are numbered once per file; others are coded now.
    try:
        fid = np.array(ids)
        if fid.dtype != np.int64 or fid.ndim != 1:  # (ids that are lists of ints make a 2-D array: unhashable)
            fid = c.flow_id.codes(ids)
    except (TypeError, ValueError, OverflowError):
        fid = c.flow_id.codes(ids)
    ts = [e.ts for e in fev]
    del fev
    ts_ns, ts_bad = times_to_ns(ts, defer=True)
    again = None
    if ts_bad.any() and _needs_text(ts):
        again = redecode()
        if again is not None:
            ts_ns, ts_bad = times_to_ns([e.ts for e in compress(again, sel)])
    return fid, ts_ns, ts_bad, again


def _corr(values: list[Any]) -> np.ndarray:
    """``args.correlation`` per event as int64, -1 where absent or not an integer."""
    try:
        a = np.array(values)
        if a.dtype == np.int64:
            return a
    except (TypeError, ValueError, OverflowError):
        pass
    return np.array([x if type(x) is int and -(2**63) <= x < 2**63 else -1 for x in values], dtype=np.int64)


def _needs_text(values: list[Any]) -> bool:
    return any(type(v) is float and abs(v) >= FLOAT_EXACT_LIMIT_US for v in values)


def _hashable_only(ev: list[Any], c: Cols) -> list[bool]:
    """Which events have hashable key fields; the others are counted as malformed."""
    ok: list[bool] = []
    bad = no_ph = 0
    for e in ev:
        a = e.args
        try:
            hash((e.ph, e.cat, e.pid, e.tid, e.name, e.id, None if a is None else a.task_type))
            ok.append(True)
        except TypeError:
            ok.append(False)
            # Without ph it can never count, whatever else it holds: counted as the other events without ph.
            if e.ph is None:
                no_ph += 1
            else:
                bad += 1
    if bad:
        c.dropped["malformed"] = c.dropped.get("malformed", 0) + bad
    if no_ph:
        c.dropped[NO_PH] = c.dropped.get(NO_PH, 0) + no_ph
    return ok


def _metadata(e: Any, c: Cols) -> None:
    a = e.args
    if a is None:
        return
    nm = e.name
    try:
        if nm == "process_name" and a.name is not None:
            c.meta_proc[e.pid] = str(a.name)
        elif nm == "thread_name" and a.name is not None:
            c.meta_thread[(e.pid, e.tid)] = str(a.name)
        elif nm == "process_labels" and a.labels is not None:
            c.meta_labels[e.pid] = str(a.labels)
    except TypeError:
        pass

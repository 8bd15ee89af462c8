"""What a Chrome trace holds beyond its Timeline, carried into ``export --format perfetto``, and a tally of its events.

The readers keep what the analysis needs. Python frames (``python_function``:
94 % of a vLLM trace recorded with stacks), the whole-trace span (``Trace``),
profiler overhead and instants are dropped while decoding
(:data:`expo_prof.readers.chrome.batch.DROP_CATS`), and an Ascend trace's
derived lanes (Overlap Analysis, HCCL planes) by their process. The Perfetto
export therefore reads the source's bytes again, as the JSON export does
(:func:`.raw_trace.load_raws`), and :func:`carry` takes from them:

* every complete event the Timeline does not hold, as a slice on the track of
  its thread: the Timeline's lane of that pid and tid where there is one (so a
  Python frame nests around the ops it calls), else a track of its own, named
  after the source's process and thread names;
* every instant event, as an instant on its thread's track (global-scope ones
  on one ``global instants`` track);
* a tally of every event of the source by category (complete events),
  ``instant …``, ``flow …``, ``metadata``, ``counter`` or ``ph=…`` (other phases), split
  into what the file holds and what it leaves out: metadata, counters, async
  and other phases, events without a usable time, and (decided by the export)
  flow events that bind no two exported slices.

Times are converted as the reader converts them
(:func:`~expo_prof.readers.chrome.columns.times_to_ns`: exact ns from the µs
numbers, the number's text where a float cannot hold it), so a frame and the
op it calls keep their order to the ns. Only names, times, threads and
categories are carried: the sources' args stay in the JSON export.

Memory: the source is read a window at a time (as for the JSON export), events
decoded :data:`BATCH` at a time (or about a MB of them), and what is kept of them are columns (a code
per distinct (ph, cat, pid, tid), ns times) and one string per distinct name.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import orjson

from expo_prof.export import raw_trace
from expo_prof.readers.chrome.batch import DROP_CATS
from expo_prof.readers.chrome.columns import int_or, times_to_ns
from expo_prof.readers.chrome.decode import Event, EventRawTs
from expo_prof.readers.timeparse import FLOAT_EXACT_LIMIT_US
from expo_prof.timeline import Timeline

#: Tally label of events that did not decode as an event object with hashable fields.
MALFORMED = "malformed"
#: Tally label of events of an earlier multi-rank export that belong to no rank (its own analysis tracks).
NO_RANK = "of no rank"


class _Ev(Event, gc=False):
    # The reader's own event (the same fields decoded the same way: an event it finds malformed, e.g. of an
    # unknown phase or with args that are no object, is malformed here too), and an instant's scope.
    s: Any = None


class _EvRawTs(EventRawTs, gc=False):
    # Re-decode when a float time is too large for a float64 to hold to the ns: the number's text.
    s: Any = None


_DEC: dict[bool, msgspec.json.Decoder] = {False: msgspec.json.Decoder(list[_Ev]), True: msgspec.json.Decoder(list[_EvRawTs])}
_DEC_ONE = {raw: msgspec.json.Decoder(c) for raw, c in ((False, _Ev), (True, _EvRawTs))}
_INT = re.compile(r"-?\d+")
# What becomes of the events of one (ph, cat, pid, tid).
_KEPT, _SLICE, _INSTANT, _FLOW, _LEFT, _META, _SKIP = range(7)


@dataclass
class Carried:
    """What :func:`carry` found: tracks, slices and instants to write, and the tally of the source's events.

    ``tracks`` are (Timeline lane or -1, name); slices and instants name their track by index. Times are ns
    on the source's clock (its base time added, as in the Timeline). ``written`` counts by label what the
    file holds once these and the Timeline's events are written (flows not yet: ``flow_events`` counts the
    source's flow events by category, and the export decides which it binds); ``left`` what it leaves out.
    """

    tracks: list[tuple[int, str]] = field(default_factory=list)
    track: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    end: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    names: list[str] = field(default_factory=list)
    cats: list[str] = field(default_factory=list)
    inst_track: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    inst_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    inst_names: list[str] = field(default_factory=list)
    inst_cats: list[str] = field(default_factory=list)
    written: Counter = field(default_factory=Counter)
    left: Counter = field(default_factory=Counter)
    flow_events: Counter = field(default_factory=Counter)
    #: Complete events taken to be the Timeline's own (the export checks this against the Timeline).
    kept: int = 0


def carry(t: Timeline, src: raw_trace.RawTrace) -> Carried:
    """The events of ``src`` (the bytes ``t`` was read from) that ``t`` does not hold, and the tally of all."""
    p = _Pass(t, src)
    for batch in _batches(src):
        p.batch(batch)
    return p.result()


#: Events decoded at a time: a decoded event costs a few hundred bytes, its columns a few dozen.
BATCH = 16384


def _batches(src: raw_trace.RawTrace) -> Iterator[list[msgspec.Raw]]:
    """The source's events as undecoded slices, ``BATCH`` at a time (read a window at a time)."""
    yield from src.batches(BATCH)


class _Pass:
    """One pass over a source's events: what becomes of each (ph, cat, pid, tid), and what is collected."""

    def __init__(self, t: Timeline, src: raw_trace.RawTrace) -> None:
        self.mine, self.others, self.first_rank = _rank_pids(src, t)
        self.base = int(t.meta.get("base_time_ns") or 0)
        self.lane_of: dict[tuple[int, int], int] = {}
        for li, ln in enumerate(t.lanes):
            self.lane_of.setdefault((int(ln.pid), int(ln.tid)), li)
        self.table: dict[tuple, int] = {}
        self.what: list[int] = []
        self.label: list[str] = []
        self.track: list[int] = []
        self.threads: dict[Any, int] = {}
        self.thread_keys: list[tuple[int, Any]] = []  # per track: (Timeline lane or -1, (pid, tid))
        self.names: dict = {}  # the source's process and thread names (metadata)
        self.strings: dict[str, str] = {}  # one str object per distinct event name
        self.counts: Counter = Counter()  # per code: events (complete and instants: with a usable time)
        self.no_time: Counter = Counter()  # per code: complete events / instants without a usable time
        self.malformed = 0
        self.kept = 0
        # Slices and instants, a chunk per batch: code, start, end (instants: ts), name, global scope.
        self.s_code: list[np.ndarray] = []
        self.s_start: list[np.ndarray] = []
        self.s_end: list[np.ndarray] = []
        self.s_name: list[str] = []
        self.i_code: list[np.ndarray] = []
        self.i_ts: list[np.ndarray] = []
        self.i_name: list[str] = []
        self.i_global: list[bool] = []

    def batch(self, raws: list[msgspec.Raw]) -> None:
        evs = _decode(raws, raw_ts=False)
        self.malformed += len(raws) - len(evs)
        codes = self._codes(evs)
        w = np.array(self.what + [_SKIP], dtype=np.int8)[codes]  # (code -1: malformed, the last entry)
        live = codes >= 0
        self.malformed += int((~live).sum())
        for k, n in enumerate(np.bincount(codes[live], minlength=len(self.what)).tolist()):
            if n and self.what[k] in (_LEFT, _FLOW, _META):
                self.counts[k] += n
        for i in np.flatnonzero(w == _META).tolist():
            _metadata(evs[i], self.names)
        sel = np.flatnonzero((w == _KEPT) | (w == _SLICE))
        if len(sel):
            ts, tbad = _times(evs, raws, sel, "ts")
            dur, dbad = _times(evs, raws, sel, "dur")
            good = ~(tbad | dbad)
            self._count(codes[sel], good)
            self.kept += int((good & (w[sel] == _KEPT)).sum())
            x = good & (w[sel] == _SLICE)
            self.s_code.append(codes[sel[x]])
            self.s_start.append(ts[x] + self.base)
            self.s_end.append(ts[x] + self.base + np.maximum(dur[x], 0))  # the reader sets a negative one to 0 too
            self.s_name += [self._name(evs[i].name) for i in sel[x].tolist()]
        sel = np.flatnonzero(w == _INSTANT)
        if len(sel):
            ts, bad = _times(evs, raws, sel, "ts")
            self._count(codes[sel], ~bad)
            sel, ts = sel[~bad], ts[~bad]
            self.i_code.append(codes[sel])
            self.i_ts.append(ts + self.base)
            self.i_name += [self._name(evs[i].name) for i in sel.tolist()]
            self.i_global += [evs[i].s == "g" for i in sel.tolist()]

    def _codes(self, evs: list) -> np.ndarray:
        """One code per distinct (ph, cat, pid, tid), -1 for an event with an unhashable one; new ones decided."""
        table = self.table
        keys = [(e.ph, e.cat, e.pid, e.tid) for e in evs]
        try:
            codes = [table.setdefault(k, len(table)) for k in keys]
        except TypeError:  # a pid / tid / cat that is a JSON object or array: that event is malformed
            codes = []
            for k in keys:
                try:
                    codes.append(table.setdefault(k, len(table)))
                except TypeError:
                    codes.append(-1)
        for key in list(table)[len(self.what):]:
            self._decide(*key)
        return np.array(codes, dtype=np.int64)

    def _decide(self, ph: Any, ct: Any, pid: Any, tid: Any) -> None:
        """What becomes of the events of one (ph, cat, pid, tid), their label and track."""
        self.track.append(-1)
        if self.mine is not None and pid not in self.mine:
            # Another rank's event (its own export tallies it), or one of no rank: tallied once, by the first rank.
            self.what.append(_LEFT if self.first_rank and pid not in self.others else _SKIP)
            self.label.append(NO_RANK)
            return
        cat = ct if isinstance(ct, str) and ct else None
        lane = self.lane_of.get((int_or(pid, 0), int_or(tid, 0)))
        if ph == "X":
            self.label.append(cat or "no category")
            # The reader keeps a complete event of a kept category on a lane it keeps (Ascend drops some).
            self.what.append(_KEPT if ct not in DROP_CATS and lane is not None else _SLICE)
        elif ph in ("i", "I"):
            self.label.append("instant" + (f" {cat}" if cat else ""))
            self.what.append(_INSTANT)
        elif ph in ("s", "t", "f"):
            self.label.append(f"flow {ct}")
            self.what.append(_FLOW)
        else:
            self.label.append({"M": "metadata", "C": "counter"}.get(ph, f"ph={ph}"))
            self.what.append(_META if ph == "M" else _LEFT)
        if self.what[-1] in (_SLICE, _INSTANT):
            # On the Timeline's lane only when pid and tid are that lane's numbers (not a name like "Spans").
            exact = all(type(v) is int or (isinstance(v, str) and _INT.fullmatch(v)) for v in (pid, tid))
            self.track[-1] = self._thread(lane, lane) if lane is not None and exact else self._thread((pid, tid), -1)

    def _thread(self, key: Any, lane: int) -> int:
        if key not in self.threads:
            self.threads[key] = len(self.thread_keys)
            self.thread_keys.append((lane, key))
        return self.threads[key]

    def _count(self, codes: np.ndarray, good: np.ndarray) -> None:
        for k, n in Counter(codes[good].tolist()).items():
            self.counts[k] += n
        for k, n in Counter(codes[~good].tolist()).items():
            self.no_time[k] += n

    def _name(self, n: Any) -> str:
        s = n if type(n) is str else ("" if n is None else str(n))
        return self.strings.setdefault(s, s)

    def result(self) -> Carried:
        out = Carried(kept=self.kept)
        out.left[MALFORMED] += self.malformed
        keys = list(self.table)
        for k, n in self.counts.items():
            what, label = self.what[k], self.label[k]
            if what == _FLOW:
                ct = keys[k][1]
                out.flow_events[ct if isinstance(ct, str) else str(ct)] += n
            elif what in (_LEFT, _META):
                out.left[label] += n
            else:
                out.written[label] += n
        for k, n in self.no_time.items():
            out.left[f"{self.label[k]} without a usable time"] += n
        track = np.array(self.track + [-1], dtype=np.int64)
        i_code = _cat(self.i_code)
        i_track = track[i_code]
        if any(self.i_global):
            i_track[np.array(self.i_global)] = self._thread("g", -1)
        out.tracks = [(lane, "global instants" if key == "g" else "" if lane >= 0 else _thread_name(key[0], key[1], self.names))
                      for lane, key in self.thread_keys]
        s_code = _cat(self.s_code)
        out.track, out.start, out.end = track[s_code], _cat(self.s_start), _cat(self.s_end)
        out.names, out.cats = self.s_name, [self.label[k] for k in s_code.tolist()]
        out.inst_track, out.inst_ts, out.inst_names = i_track, _cat(self.i_ts), self.i_name
        out.inst_cats = [self.label[k] for k in i_code.tolist()]
        return out


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _decode(raws: list[msgspec.Raw], raw_ts: bool) -> list:
    """The events among ``raws`` that decode as event objects (all of them, but for malformed ones)."""
    try:
        return _DEC[raw_ts].decode(b"[" + b",".join(raws) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        # An element that is no event object (a number, a field of an odd type): one by one.
        out = []
        for r in raws:
            try:
                out.append(_DEC_ONE[raw_ts].decode(r))
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
        return out


def _times(evs: list, raws: list[msgspec.Raw], sel: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    """ns and unusable flags of the events ``sel``'s ``ts`` or ``dur``, as the reader converts them."""
    values = [getattr(evs[i], what) for i in sel.tolist()]
    ns, bad = times_to_ns(values)
    if bad.any() and any(type(v) is float and abs(v) >= FLOAT_EXACT_LIMIT_US for v in values):
        again = _decode(raws, raw_ts=True)  # the number's text (a malformed event drops out of both alike)
        ns, bad = times_to_ns([getattr(again[i], what) for i in sel.tolist()])
    return ns, bad


def _metadata(e: Any, names: dict) -> None:
    """A process or thread name of the source's metadata into ``names``: {pid: name, (pid, tid): name}."""
    if e.name in ("process_name", "thread_name") and e.args is not None and e.args.name is not None:
        names[e.pid if e.name == "process_name" else (e.pid, e.tid)] = str(e.args.name)


def _thread_name(pid: Any, tid: Any, names: dict) -> str:
    """A track's name for a thread the Timeline has no lane for: the source's process · thread names."""
    p = names.get(pid) or (pid if isinstance(pid, str) and pid else f"pid {pid}")
    t = names.get((pid, tid)) or (tid if isinstance(tid, str) and tid else f"tid {tid}")
    return f"{p} · {t}"


def _rank_pids(src: raw_trace.RawTrace, t: Timeline) -> tuple[frozenset | None, frozenset, bool]:
    """For one rank of a multi-rank export (``split_from``): its pids, the other ranks' pids, and whether it is
    the export's first rank (which tallies the events of no rank); (None, {}, False) for any other source."""
    if "split_from" not in t.meta:
        return None, frozenset(), False
    try:
        rp = orjson.loads(bytes(src.top["expoProf"]))["rank_pids"]
        rank_of = {int(p): int(r) for p, r in rp.items()}
    except (KeyError, TypeError, ValueError, AttributeError, orjson.JSONDecodeError):
        return frozenset(), frozenset(), False  # (the reader split it by the same map: not reached)
    return (frozenset(p for p, r in rank_of.items() if r == t.rank),
            frozenset(p for p, r in rank_of.items() if r != t.rank), t.rank == min(rank_of.values()))

"""A Chrome trace's own bytes, for ``export``: every event, flow, metadata entry and top-level key, undecoded.

The readers keep only the columns the analysis needs; an export must keep
everything else too (flow arrows, ``deviceProperties``, kernel args). So the
JSON trace is read again here, as raw slices, by the chrome reader's own walk
(:class:`~expo_prof.readers.chrome.walk.ArrayWalk`: the head, the event array
split at event boundaries into chunks of about
:data:`~expo_prof.readers.chrome.decode.CHUNK_BYTES` bytes, blanks never held,
the end of the document), and msgspec checks each chunk and splits it into one
undecoded slice per event (:class:`msgspec.Raw`). A first walk checks the
file and takes its top-level keys (:func:`load_raw`); the writing walks it
again (:meth:`RawTrace.pieces`). A lone rank is copied byte for byte; several
ranks are rewritten event by event (pid, tid, ts, flow id) so that they stay
apart — see :class:`Rewriter`.

Memory: one window, one chunk and its slices, whatever the file's size (issue
34: the file was read whole, 1.4 GB at peak for a 1 GB trace); nothing is
decoded into Python objects unless it has to be rewritten, and the output is
streamed (never the whole document at once).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import msgspec
import orjson

from expo_prof.errors import BadInput
from expo_prof.readers.chrome.walk import HEAD_MAX, ArrayWalk, DocEnd
from expo_prof.readers.chrome.window import DamagedGzip, Window
from expo_prof.readers.long_names import LONG, LongNames

#: Reader formats whose file is a Chrome trace that can be passed through.
JSON_FMTS = ("kineto", "ascend-trace-view", "msprof")
#: Events written per output chunk.
CHUNK = 4096

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])
_RAW = msgspec.json.Decoder(msgspec.Raw)


@dataclass
class RawTrace:
    """One Chrome-trace file (or the slices of one), checked and walked without holding it: its top-level keys
    (minus the events, as undecoded slices) and the number of its events; :meth:`pieces` reads its event
    arrays again, a window at a time."""

    path: Path
    top: dict[str, msgspec.Raw]
    paths: list[Path]
    n_events: int
    max_bytes: int

    def pieces(self) -> Iterator[tuple[bool, bytes, list[msgspec.Raw]]]:
        """The events of every file in order, a chunk at a time: (starts a new file's array, the chunk's text
        exactly as in the file (the separators after it included, the blanks before the array's ``]`` not),
        one undecoded slice per event of the chunk)."""
        for p in self.paths:
            walk = _Walk(p, self.max_bytes)
            first = True
            for text, raws in walk.pieces():
                yield first, text, raws
                first = False

    def batches(self, size: int) -> Iterator[list[msgspec.Raw]]:
        """The events as undecoded slices, at most ``size`` (or about a MB of them) at a time."""
        out: list[msgspec.Raw] = []
        held = 0
        for _new, text, raws in self.pieces():
            out += raws
            held += len(text)
            if len(out) >= size or held >= _BATCH_BYTES:
                yield out
                out, held = [], 0
        if out:
            yield out

    def free(self) -> None:
        self.top = {}


#: Bytes of events handed out together by :meth:`RawTrace.batches`.
_BATCH_BYTES = 1 << 20
_AT_BYTE = re.compile(r"\(byte (\d+)\)")
#: A chunk of the event array: its text exactly as in the file (the separators after it included, the blanks
#: before the array's ``]`` not) and one undecoded slice per event.
Piece = tuple[bytes, list[msgspec.Raw]]


class _NotPlain(Exception):
    """The file is not plain valid JSON (the message says where)."""


class _Walk:
    """One file's event array read by the chrome reader's walk (:class:`_RawWalk`: a
    :class:`~expo_prof.readers.chrome.window.Window`, plain or gzip, the size cap), each chunk checked by
    msgspec; the document's other keys are decoded at the end from the text before the array and the text
    after its last chunk."""

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.top: dict[str, msgspec.Raw] = {}
        self.n = 0

    def pieces(self) -> Iterator[Piece]:
        try:
            with Window(self.path, max_bytes=self.max_bytes) as w:
                walk = _RawWalk(w)
                last = yield from walk.pieces()
                if last is not None:
                    yield last
                self.top, self.n = walk.top, walk.n
        except DamagedGzip as exc:
            raise BadInput(f"{self.path}: damaged gzip data ({exc})") from None
        except (_NotPlain, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise BadInput(f"{self.path}: not plain valid JSON ({str(exc).splitlines()[0]})") from None


class _RawWalk(ArrayWalk[Piece, Piece | None]):
    """The walk that passes every element through: each chunk split into undecoded slices by msgspec, nothing
    skipped but blanks, and anything that is not plain valid JSON refused (:class:`_NotPlain`: the export then
    writes the events the timeline holds)."""

    def __init__(self, w: Window) -> None:
        super().__init__(w)
        self.top: dict[str, msgspec.Raw] = {}
        self.n = 0
        self._past_end = -1

    def chunk(self, i: int, e: int, nxt: int) -> Piece | None:
        """The chunk's text (and the separator after it) and its events as slices; None when ``e`` was no
        event's end."""
        w = self.w
        doc = b"[" + bytes(w.buf[i:e]) + b"]"
        self._past_end = -1
        try:
            raws = _ARRAY.decode(doc)
        except msgspec.DecodeError as exc:
            # Cut inside a string or a nested value ("truncated", or an error at the "]" added): that "}" was no
            # event's end; past the array's own "]" ("trailing characters": a later list of the top level), the
            # walk looks for the end of the document there. Anything else is damage inside the chunk.
            msg = str(exc)
            at = _AT_BYTE.search(msg)
            if at is not None and "trailing characters" in msg:
                self._past_end = i - 2 + int(at.group(1))  # msgspec counts the trailing byte in
                return None
            if "truncated" not in msg and (at is None or int(at.group(1)) < len(doc) - 1):
                raise _NotPlain(f"{exc} (the chunk from byte {w.base + i:,})") from None
            return None
        self.n += len(raws)
        return doc[1:-1] + bytes(w.buf[e:nxt]), raws

    def past_end(self) -> int:
        return self._past_end

    def no_array(self) -> Piece | None:
        raise _NotPlain(f"no traceEvents array in the first {HEAD_MAX >> 20} MB")

    def cut_by_nul(self, i: int, k: int) -> Piece | None:
        raise _NotPlain(f"NUL bytes from byte {self.w.base + k:,}")

    def close(self, i: int, doc: DocEnd, after: int, dropped: int) -> Piece | None:
        """The last events and the top level, from the document up to its end; anything but blanks after it is
        refused."""
        w = self.w
        if after >= 0:
            raise _NotPlain(f"trailing data after the end of the JSON document, from byte {w.base + after + dropped:,}")
        return self._tail(bytes(w.buf[i : doc.end - w.base]))

    def at_eof(self, i: int) -> Piece | None:
        return self._tail(bytes(self.w.buf[i : self.w.hi]))

    def _tail(self, rest: bytes) -> Piece | None:
        """The last events (None: there are none) and the top level's keys, from ``rest``: the document from the
        last chunk's start to its end."""
        tail = self.head + rest
        if self.is_array:
            arr = _RAW.decode(tail)
        else:
            self.top = {k: msgspec.Raw(bytes(v)) for k, v in _TOP.decode(tail).items()}
            got = self.top.pop("traceEvents", None)
            if got is None or bytes(memoryview(got)[:1]) != b"[":
                raise _NotPlain("traceEvents is not an array")
            arr = got
        raws = _ARRAY.decode(arr)
        if not raws:
            return None
        self.n += len(raws)
        mv = memoryview(arr)
        lo, hi = 1, len(mv) - 1
        while mv[lo] in b" \t\r\n":
            lo += 1
        while mv[hi - 1] in b" \t\r\n":
            hi -= 1
        return bytes(mv[lo:hi]), raws


def load_raw(path: Path, max_bytes: int) -> RawTrace:
    """Check that ``path`` (plain or gzip) is plain valid JSON with an event array, a window at a time, and
    take its top-level keys and count its events; BadInput when it is not (the readers repair cut or damaged
    files; an export then falls back to what the timeline holds). Memory: one window and a chunk of events,
    whatever the file's size (issue 34: the file was read whole, 1.4 GB at peak for a 1 GB trace)."""
    walk = _Walk(path, max_bytes)
    for _ in walk.pieces():
        pass
    return RawTrace(path, walk.top, [path], walk.n, max_bytes)


def trace_files(t: Any, *, split_ok: bool = False) -> list[Path] | None:
    """The files a Timeline was read from when they are a Chrome trace that can be read again (None if not).

    One rank of a multi-rank export (``split_from``) shares its file with the other ranks: only with
    ``split_ok``, for a caller that picks the rank's events itself.
    """
    files = [Path(f) for f in (t.meta.get("merged_from") or [t.source])]
    if ("split_from" in t.meta and not split_ok) or t.fmt not in JSON_FMTS:
        return None
    return files if all(f.is_file() for f in files) else None


def us_to_ns(ts: float | int) -> int:
    """A JSON µs number → ns, from its decimal digits (``ts * 1000`` in binary is off by one ns past ~1e12 µs)."""
    if isinstance(ts, int):
        return ts * 1000
    return int((Decimal(repr(ts)) * 1000).to_integral_value(ROUND_HALF_EVEN))


def load_raws(paths: list[Path], max_bytes: int) -> RawTrace:
    """Several files read as one Timeline (msprof JSON slices): their events one after the other, the first's
    top-level keys."""
    parts = [load_raw(p, max_bytes) for p in paths]
    first = parts[0]
    first.paths = [p for part in parts for p in part.paths]
    first.n_events = sum(p.n_events for p in parts)
    return first


def verbatim_pieces(src: RawTrace) -> Iterator[tuple[bool, bytes]]:
    """The event arrays' contents exactly as in the files, a chunk at a time: (starts a new list item, bytes).
    Nothing is decoded into objects: the text between the brackets is written as it is."""
    for new, text, _raws in src.pieces():
        yield new, text


#: Category of events of sources that were read but not counted (the readers drop it).
UNCOUNTED_CAT = "expo_prof_source"
#: Flow and async phases whose ``id`` ties events together: the ids of several ranks must not meet.
_ID_PHASES = frozenset("stfbenSTFpPOND")
#: pids of rank R when several ranks are exported together: RANK_PID + R * RANK_STRIDE + n (n: the rank's n-th
#: original process).
RANK_PID = 1_000_000_000
RANK_STRIDE = 1000


@dataclass
class RankPids:
    """The pids of one rank's processes in an export of several ranks (shared by every source of the rank)."""

    rank: int
    pids: dict[Any, int] = field(default_factory=dict)
    #: new pids that got a process_labels event from their source
    labelled: set[int] = field(default_factory=set)

    def of(self, orig_pid: Any) -> int:
        p = self.pids.get(orig_pid)
        if p is None:
            n = len(self.pids)
            if n >= RANK_STRIDE:
                raise BadInput(f"rank {self.rank} has over {RANK_STRIDE} processes; export fewer sources at once")
            p = self.pids[orig_pid] = RANK_PID + self.rank * RANK_STRIDE + n
        return p


@dataclass
class Rewriter:
    """Moves one source's events into its rank's pids (several ranks in one export).

    Each original process gets its own pid in the rank's block
    (:class:`RankPids`): ranks never share a pid, and a process keeps its
    threads, its tids and its metadata — Kineto's device pid stays one
    device, torch_npu's process names keep their roles. ``process_labels``
    get ``rank R`` in front and ``process_sort_index`` groups by rank. ``ts``
    moves by ``shift_ns`` onto the export's clock (exact ns while |ts| <
    9e12 µs); flow/async ids get the rank's prefix so arrows never join two
    ranks.
    """

    pids: RankPids | None  # None: pids stay (one rank)
    shift_ns: int
    id_prefix: int
    #: A source read but not counted (``--source`` chose another of its rank): its complete events get the
    #: category ``expo_prof_source`` (the original in ``args.source_cat``), which the readers drop.
    inert: bool = False
    #: The long-name budget of a source whose reader cut names (issue 34): its long names are cut the same way
    #: (:mod:`expo_prof.readers.long_names`), so the export stays bounded as the Timeline is. None: names stay.
    names: LongNames | None = None

    def chunks(self, src: RawTrace) -> Iterator[bytes]:
        out: list[bytes] = []
        # Only names are cut: an event too short to hold a long name is copied as it is.
        names_only = self.pids is None and not self.shift_ns and not self.id_prefix and not self.inert
        for r in (r for _new, _text, raws in src.pieces() for r in raws):
            if names_only and len(r) <= LONG:
                out.append(bytes(r))
            else:
                out.append(self.one(orjson.loads(bytes(r))))
            if len(out) >= CHUNK:
                yield b",".join(out)
                out = []
        if out:
            yield b",".join(out)

    def one(self, ev: Any) -> bytes:
        if not isinstance(ev, dict):
            return orjson.dumps(ev)
        ph = ev.get("ph")
        name = ev.get("name")
        if self.names is not None and isinstance(name, str) and len(name) > LONG:
            ev["name"] = self.names.fit(name)
        if self.inert and ph == "X":
            args = ev.get("args")
            ev["args"] = {**(args if isinstance(args, dict) else {}), "source_cat": ev.get("cat")}
            ev["cat"] = UNCOUNTED_CAT
        if self.pids is not None and "pid" in ev:
            ev["pid"] = self.pids.of(ev["pid"])
        if ph == "M" and self.pids is not None:
            args = ev.get("args")
            if ev.get("name") == "process_labels" and isinstance(args, dict):
                args["labels"] = f"rank {self.pids.rank}" + (f", {args['labels']}" if args.get("labels") else "")
                if "pid" in ev:
                    self.pids.labelled.add(ev["pid"])
            elif ev.get("name") == "process_sort_index" and isinstance(args, dict):
                si = args.get("sort_index")
                if isinstance(si, int) and not isinstance(si, bool):
                    args["sort_index"] = self.pids.rank * RANK_STRIDE + (si % RANK_STRIDE)
        ts = ev.get("ts")
        if self.shift_ns and isinstance(ts, (int, float)) and not isinstance(ts, bool):
            ev["ts"] = (us_to_ns(ts) + self.shift_ns) / 1000
        if ph in _ID_PHASES:
            i = ev.get("id")
            if isinstance(i, int) and not isinstance(i, bool) and self.id_prefix:
                ev["id"] = self.id_prefix + i
            elif isinstance(i, str) and self.pids is not None:
                ev["id"] = f"r{self.pids.rank}:{i}"
        return orjson.dumps(ev)


def rank_labels(pids: RankPids) -> list[dict]:
    """``process_labels: rank R`` for the rank's processes whose source wrote no labels."""
    return [{"ph": "M", "pid": p, "name": "process_labels", "args": {"labels": f"rank {pids.rank}"}}
            for p in pids.pids.values() if p not in pids.labelled]

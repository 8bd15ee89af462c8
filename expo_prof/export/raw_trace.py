"""A Chrome trace's own bytes, for ``export``: every event, flow, metadata entry and top-level key, undecoded.

The readers keep only the columns the analysis needs; an export must keep
everything else too (flow arrows, ``deviceProperties``, kernel args). So the
JSON trace is read a second time here, as raw slices: msgspec splits the
top level into undecoded values and the event array into one undecoded slice
per event (:class:`msgspec.Raw`, views of one buffer). A lone rank is copied
byte for byte; several ranks are rewritten event by event (pid, tid, ts,
flow id) so that they stay apart — see :class:`Rewriter`.

Memory: the decompressed file (capped by ``--max-bytes``) plus one small Raw
object per event; nothing is decoded into Python objects unless it has to
be rewritten, and the output is streamed (never the whole document at once).
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
from expo_prof.readers.file_bytes import read_bytes
from expo_prof.readers.long_names import LONG, LongNames

#: Reader formats whose file is a Chrome trace that can be passed through.
JSON_FMTS = ("kineto", "ascend-trace-view", "msprof")
#: Events written per output chunk.
CHUNK = 4096

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])
_RAW = msgspec.json.Decoder(msgspec.Raw)
_NON_SPACE = re.compile(rb"[^ \t\r\n]")


@dataclass
class RawTrace:
    """One Chrome-trace file (or the slices of one) as undecoded pieces: its top-level keys (minus the events)
    and its event arrays, each one undecoded slice (:attr:`events` splits them when an export must rewrite)."""

    path: Path
    top: dict[str, msgspec.Raw]
    arrays: list[Any]  # each the JSON text of one file's event array, brackets included
    data: Any = field(repr=False, default=None)  # the buffers the slices point into
    _events: list[msgspec.Raw] | None = field(default=None, repr=False)

    @property
    def events(self) -> list[msgspec.Raw]:
        """One undecoded slice per event (decoded on first use: one small object per event)."""
        if self._events is None:
            self._events = [r for a in self.arrays for r in _ARRAY.decode(a)]
        return self._events

    def free(self) -> None:
        self.top, self.arrays, self.data, self._events = {}, [], None, None


def load_raw(path: Path, max_bytes: int) -> RawTrace:
    """Split ``path`` (plain or gzip) into top-level keys and its event array; BadInput when it is not plain valid
    JSON (the readers repair cut or damaged files; an export then falls back to what the timeline holds)."""
    loaded = read_bytes(path, max_bytes=max_bytes)
    data = loaded.take()  # a bytearray: decoded in place, never copied (the Raw slices point into it)
    try:
        # Decoding into Raw values still checks the whole text is valid JSON, without building any object.
        first = _NON_SPACE.search(data)  # (data.lstrip() would copy the whole file)
        is_array = first is not None and first.group() == b"["
        top = _TOP.decode(data) if not is_array else {"traceEvents": _RAW.decode(data)}
        ev = top.pop("traceEvents", None)
        if ev is not None and bytes(memoryview(ev)[:1]) != b"[":
            raise BadInput(f"{path}: traceEvents is not an array")
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadInput(f"{path}: not plain valid JSON ({str(exc).splitlines()[0]})") from None
    return RawTrace(path, top, [ev] if ev is not None else [], data)


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
    first.arrays = [a for p in parts for a in p.arrays]
    first.data = [p.data for p in parts]
    return first


#: Bytes per piece of a passed-through event array.
PIECE = 1 << 23


def verbatim_pieces(src: RawTrace) -> Iterator[tuple[bool, Any]]:
    """The event arrays' contents exactly as in the files, in pieces of at most ``PIECE`` bytes: (starts a new
    list item, bytes). Nothing is decoded: the text between the brackets is written as it is."""
    for a in src.arrays:
        mv = memoryview(a)
        lo, hi = 1, len(mv) - 1  # inside [ … ]
        while lo < hi and mv[lo] in b" \t\r\n":
            lo += 1
        while hi > lo and mv[hi - 1] in b" \t\r\n":
            hi -= 1
        first = True
        for k in range(lo, hi, PIECE):
            yield first, mv[k : min(k + PIECE, hi)]
            first = False


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
        for r in src.events:
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

"""The source's own bytes, for ``export``: every event, flow, metadata entry and top-level key of a Chrome trace.

The readers keep only the columns the analysis needs; an export must keep
everything else too (flow arrows, ``deviceProperties``, kernel args). So the
JSON source is read a second time here, as raw slices: msgspec splits the
top level into undecoded values and the event array into one undecoded slice
per event (:class:`msgspec.Raw`, views of one buffer). A lone rank is copied
byte for byte; several ranks are rewritten event by event (pid, tid, ts,
flow id) so that they stay apart — see :class:`Rewriter`.

Memory: the decompressed file (capped by ``--max-bytes``) plus one small Raw
object per event; nothing is decoded into Python objects unless it has to
be rewritten, and the output is streamed (never the whole document at once).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import orjson

from expo_prof.errors import BadInput
from expo_prof.readers.source import read_bytes

#: Reader formats whose file is a Chrome trace that can be passed through.
JSON_FMTS = ("kineto", "ascend-trace-view", "msprof")
#: Events written per output chunk.
CHUNK = 4096

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])


@dataclass
class RawSource:
    """One Chrome-trace file as undecoded pieces: its top-level keys (minus the events) and its events."""

    path: Path
    top: dict[str, msgspec.Raw]
    events: list[msgspec.Raw]
    data: Any = field(repr=False, default=None)  # the buffer the Raw slices point into


def load_raw(path: Path, max_bytes: int) -> RawSource:
    """Split ``path`` (plain or gzip) into top-level keys and raw events; BadInput when it is not plain valid JSON
    (the readers repair cut or damaged files; an export then falls back to what the timeline holds)."""
    loaded = read_bytes(path, max_bytes=max_bytes)
    data = bytes(loaded.data)
    loaded.data = None
    try:
        first = data.lstrip()[:1]
        if first == b"[":
            return RawSource(path, {}, _ARRAY.decode(data), data)
        top = _TOP.decode(data)
        ev = top.pop("traceEvents", None)
        events = _ARRAY.decode(ev) if ev is not None else []
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadInput(f"{path}: not plain valid JSON ({str(exc).splitlines()[0]})") from None
    return RawSource(path, top, events, data)


def verbatim_chunks(src: RawSource) -> Iterator[bytes]:
    """The events exactly as in the file, ``CHUNK`` at a time, comma-joined (no leading comma)."""
    ev = src.events
    for i in range(0, len(ev), CHUNK):
        yield b",".join(bytes(r) for r in ev[i : i + CHUNK])


#: Flow and async phases whose ``id`` ties events together: the ids of several ranks must not meet.
_ID_PHASES = frozenset("stfbenSTFpPOND")
#: Process-scoped metadata: with one pid per rank, kept in ``otherData`` and in the thread names instead.
PROCESS_META = frozenset(("process_name", "process_labels", "process_sort_index", "process_uptime_seconds"))


@dataclass
class Rewriter:
    """Moves one source's events into its rank's process (several ranks in one export).

    Every event gets the rank's pid; each original (pid, tid) becomes one
    thread of it (``tids``, shared by every source of the rank); ``ts`` moves
    by ``shift_ns`` onto the export's clock (exact ns while |ts| < 9e12 µs);
    flow/async ids get the rank's prefix so arrows never join two ranks.
    Process-scoped metadata is collected in ``processes`` (original pid →
    {name: args}) rather than written, since it would rename the rank's process.
    """

    pid: int
    shift_ns: int
    id_prefix: int
    tids: dict[Any, int]
    processes: dict[str, dict] = field(default_factory=dict)
    #: (source, pid, tid) -> the source's thread_name args, written again by :meth:`meta_events`.
    thread_names: dict[Any, Any] = field(default_factory=dict)
    source_key: int = 0

    def tid_of(self, pid: Any, tid: Any) -> int:
        key = (self.source_key, pid, tid)
        t = self.tids.get(key)
        if t is None:
            t = self.tids[key] = len(self.tids) + 1
        return t

    def chunks(self, src: RawSource) -> Iterator[bytes]:
        out: list[bytes] = []
        for r in src.events:
            b = self.one(orjson.loads(bytes(r)))
            if b is not None:
                out.append(b)
            if len(out) >= CHUNK:
                yield b",".join(out)
                out = []
        if out:
            yield b",".join(out)

    def one(self, ev: Any) -> bytes | None:
        if not isinstance(ev, dict):
            return orjson.dumps(ev)
        pid, tid = ev.get("pid"), ev.get("tid")
        if ev.get("ph") == "M" and ev.get("name") in PROCESS_META and "tid" not in ev:
            self.processes.setdefault(str(pid), {})[ev["name"]] = ev.get("args")
            return None
        if ev.get("ph") == "M" and ev.get("name") == "thread_name":
            self.tid_of(pid, tid)
            self.thread_names[(self.source_key, pid, tid)] = ev.get("args")
            return None
        ev["pid"] = self.pid
        ev["tid"] = self.tid_of(pid, tid)
        ts = ev.get("ts")
        if self.shift_ns and isinstance(ts, (int, float)) and not isinstance(ts, bool):
            ev["ts"] = (round(ts * 1000) + self.shift_ns) / 1000
        if ev.get("ph") in _ID_PHASES:
            i = ev.get("id")
            if isinstance(i, int) and not isinstance(i, bool):
                ev["id"] = self.id_prefix + i
            elif isinstance(i, str):
                ev["id"] = f"r{self.id_prefix}:{i}"
        return orjson.dumps(ev)


def thread_meta(pid: int, tids: dict[Any, int], thread_names: dict[Any, Any], processes: dict[int, dict],
                labels: dict[int, str]) -> list[dict]:
    """One ``thread_name`` per thread of a rank's process: "<source> · <process> · <thread>", with the source's
    own pid, tid and thread_name args kept in the args (several ranks in one export)."""
    out = []
    for key, t in tids.items():
        sk, p, tid = key
        pargs = (processes.get(sk) or {}).get(str(p)) or {}
        pname = (pargs.get("process_name") or {}).get("name") if isinstance(pargs.get("process_name"), dict) else None
        targs = thread_names.get(key)
        tname = targs.get("name") if isinstance(targs, dict) else None
        name = " · ".join(x for x in (labels.get(sk), str(pname or f"pid {p}"), str(tname or f"tid {tid}")) if x)
        args: dict[str, Any] = {"name": name, "source_pid": p, "source_tid": tid}
        if targs is not None:
            args["source_args"] = targs
        out.append({"ph": "M", "pid": pid, "tid": t, "name": "thread_name", "args": args})
    return out

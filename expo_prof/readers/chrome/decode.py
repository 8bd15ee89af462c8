"""Decoding the event array of a Chrome trace a chunk at a time, straight from the input buffer.

The array is cut into chunks of about :data:`CHUNK_BYTES` at event
boundaries, and each chunk is decoded in place: the byte before its first
event and the byte after its last are swapped for ``[`` and ``]`` for the time
of one msgspec decode and put back after. Nothing is copied and no object
exists per undecoded event, and only one chunk of decoded events is alive at a
time (bounded memory, and the few thousand Structs stay in the CPU cache while
:mod:`.batch` makes columns of them).

Finding boundaries without parsing: a chunk ends at a match of
``}`` ws ``,`` ws ``{`` ws ``"`` (or ``}``: an empty object) after its target size
(:func:`next_boundary`).
Such a match can also sit inside a string or between nested objects, so a
candidate is only *accepted* when the chunk decodes: a chunk starting at a
true event start parses along the real structure, and the ``]`` put at its
end closes the array only if the end is right after a complete event. So a
decoded chunk always ends at a true boundary, and the next one starts at a
true event start (the first starts after the array's ``[``). A candidate that
does not decode is tried as raw slices (``list[msgspec.Raw]``: the structure
only, so a chunk whose strings are damaged still splits); when that fails
too the end was not a boundary and the next candidate is taken, unless msgspec
stopped before the end: that is damage (:class:`Damaged`), which no later end
would get past, and :mod:`.damage` skips the malformed event (issue 34). The
whole document: :mod:`.document`.

Chunks that only split into raw slices (invalid UTF-8 in strings, a field of
the wrong type) go through :func:`collect_raws`: batches
joined, repaired (:func:`~expo_prof.readers.file_bytes.repair`) and, if need be,
decoded event by event, skipping the malformed ones.

Filler (issue 27): at each chunk start whitespace and runs of empty objects are
skipped and counted (:func:`skip_filler`, :mod:`.filler`); elements that are
not objects have no ``}`` boundary, so over a long stretch without one a comma
is tried as the chunk end (:func:`loose_boundary`), and once the first
malformed element has been reported they are decoded as what they are, in C,
and only counted (:func:`_mixed_chunk`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal, NamedTuple

import msgspec
import numpy as np

from expo_prof.readers.chrome.batch import collect_events
from expo_prof.readers.chrome.columns import Cols
from expo_prof.readers.chrome.filler import EMPTY_DROPPED, empty_run_start, rskip_space, skip_empties, skip_space
from expo_prof.readers.file_bytes import repair

__all__ = [
    "BATCH", "CHUNK_BYTES", "DEC_ARRAY_RAW_EVENTS", "EVENTS_KEY", "NON_SPACE", "SHORT", "TOP_MAX", "Damaged", "DocEnd",
    "Ends", "NotAnArray", "Trace", "array_closed_at", "buffer_address", "closed_array", "collect_raws", "decode_chunk",
    "document_end", "end_candidates", "in_brackets", "not_json",
    "loose_boundary", "next_boundary",
    "runs_possible", "skip_filler", "split_events", "whole_elements",
]


class _Args(msgspec.Struct, gc=False, frozen=True):
    # -1 when absent: the column converts to int64 with no per-event test.
    correlation: Any = -1
    name: Any = None  # metadata events: process / thread name
    labels: Any = None  # process_labels: "CPU", "GPU 0", "NPU"
    task_type: Any = msgspec.field(default=None, name="Task Type")  # Ascend hardware tasks


_NO_ARGS = _Args()

#: Every event phase of the Chrome trace-event format. As a Literal, msgspec
#: returns the one interned string per phase (no per-event string to build,
#: hash and free); an event with another ``ph`` fails validation and is
#: skipped as malformed.
Phase = Literal[
    "X", "B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "V", "v", "R", "c", "(", ")"
]


class Event(msgspec.Struct, gc=False):
    ph: Phase | None = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: _Args | None = _NO_ARGS


#: The categories Kineto writes (current and pre-1.10 names). Decoded as a
#: Literal, each is one interned string (no per-event string to build, and its
#: hash is cached for the event key); the first chunk holding another category
#: fails validation and the file goes on with the general decoder.
KnownCat = Literal[
    "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset", "kernel", "cuda_runtime",
    "cuda_driver", "cuda_sync", "python_function", "Trace", "ac2g", "fwdbwd", "overhead", "cpu_instant_event",
    "async_cpu_to_gpu", "Kernel", "Memcpy", "Memset", "Runtime", "Driver", "Operator", "Python", "python",
]


class _EventKnownCat(Event, gc=False):
    cat: KnownCat | None = None


class EventRawTs(Event, gc=False):
    # Re-decode of a chunk whose float timestamps a float64 cannot hold to the ns.
    # (msgspec.Raw cannot be in a union: a missing value is the raw text "null".)
    ts: msgspec.Raw = msgspec.Raw(b"null")
    dur: msgspec.Raw = msgspec.Raw(b"null")


#: An element that is not an object is not an event: decoded as what it is, in C, it is counted as malformed
#: (:func:`_mixed_chunk`) instead of going through the raw-slice path one by one.
_DEC_MIXED = msgspec.json.Decoder(list[Event | None | bool | int | float | str | list[Any]])
_DEC_MIXED_RAWTS = msgspec.json.Decoder(list[EventRawTs | None | bool | int | float | str | list[Any]])
DEC_ARRAY_RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
_DEC_EVENTS = msgspec.json.Decoder(list[Event])
_DEC_EVENTS_KNOWN = msgspec.json.Decoder(list[_EventKnownCat])
_DEC_EVENTS_RAWTS = msgspec.json.Decoder(list[EventRawTs])
_DEC_EVENT = msgspec.json.Decoder(Event)
_DEC_EVENT_RAWTS = msgspec.json.Decoder(EventRawTs)

class Trace(msgspec.Struct):
    """The top level of a Kineto trace. The event array stays one undecoded slice here."""

    traceEvents: msgspec.Raw = msgspec.Raw(b"null")
    baseTimeNanoseconds: Any = None
    distributedInfo: Any = None
    deviceProperties: Any = None
    schemaVersion: Any = None
    roctracer_version: Any = None
    hip_runtime_version: Any = None
    cuda_runtime_version: Any = None
    cupti_version: Any = None
    traceName: Any = None
    displayTimeUnit: Any = None
    vllm_version: Any = None
    host_name: Any = None
    trace_id: Any = None
    #: The trailer of an ``expo-prof export`` (its ``rank_pids`` say which pid is which rank's).
    expoProf: Any = None


_DEC_TRACE = msgspec.json.Decoder(Trace)
_NULL = msgspec.Raw(b"null")

#: Target size of one chunk of the event array (≈1,000–3,000 events: small
#: enough for the decoded Structs to stay in cache while columns are made).
CHUNK_BYTES = 1 << 18
#: Events per batch on the raw-slice path.
BATCH = 1 << 11

_LBRACKET, _RBRACKET, _LBRACE, _COMMA = 0x5B, 0x5D, 0x7B, 0x2C
#: A chunk may end before an event (``{"``) or an empty object (``{}``, filler that :mod:`.filler` skips).
_QUOTE_OR_RBRACE = b'"}'



# --------------------------------------------------------------------------- the document


def not_json(where: str, b: int, at: int) -> str | None:
    """The one-line reason a document whose first byte that is not blank is ``b``, at offset ``at`` of the file,
    is no Chrome trace; None when ``b`` starts a JSON object or array. Said from the first window alone: a file
    of NUL bytes (allocated but never written: a crash) or of other binary is refused before anything is held
    (issue 42)."""
    if b in b"{[":
        return None
    if b == 0:
        return f"{where}: not valid JSON: NUL bytes from byte {at:,} (a file allocated but never written: a crash?)"
    return f"{where}: not valid JSON: byte {at:,} is {bytes([b])!r}, where a JSON document starts with {{ or ["


class NotAnArray(Exception):
    """The guessed event array does not split into events (wrong layout guess or damaged input)."""


class Damaged(Exception):
    """A chunk holds real damage (not a wrong end): msgspec stopped at ``at``, before the chunk's end, with
    ``msg``. :mod:`.damage` skips the malformed event and finds the next one."""

    def __init__(self, at: int, msg: str) -> None:
        super().__init__(msg)
        self.at = at
        self.msg = msg


_SPACE = b" \t\r\n"
_BYTE_AT = re.compile(r"\(byte (\d+)\)")
NON_SPACE = re.compile(rb"[^ \t\r\n]")
EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')
#: How many closing brackets from the end of a Kineto file are tried as the end of its event array.
_TAIL_TRIES = 64


class Ends:
    """Candidates for the offset of the event array's ``]`` (last first), each with the top level it implies.

    With ``doc`` (the document's head up to the array's ``[``, the end of what the buffer holds, whether it is a
    bare array), a chunk that reads past the array's own ``]`` settles the end at once (:meth:`close`), and
    whatever follows the document is found: :attr:`after`.
    """

    def __init__(self, a0: int, candidates: Any, doc: tuple[bytes, int, bool] | None = None) -> None:
        self.a0 = a0
        self._it = iter(candidates)
        self.top: Trace | None = None
        self._doc = doc
        #: The offset of the first byte after the document that is not blank (-1: none), once :meth:`close` found it.
        self.after = -1
        #: The end given is no candidate but the last byte of the buffer (:meth:`next`): only a chunk that reads
        #: past the array's ``]`` before it (:meth:`close`) tells where the array ends.
        self.probe = False

    def next(self, not_before: int) -> int:
        for top, a1 in self._it:
            if a1 >= not_before:
                self.top = top
                return a1
        if self._doc is not None and not self.probe:
            # No "]" near the end of the buffer is followed by the rest of the document: something follows the
            # document (a second one, garbage). The chunks read on to the last byte, to find the array's end.
            self.probe = True
            hi = self._doc[1]
            if hi - 1 >= not_before:
                return hi - 1
        raise NotAnArray

    def close(self, buf: Any, s: int, at: int) -> int:
        """The array read from the element start ``s`` closed before ``at`` (where msgspec read past it): the
        offset of its ``]`` when the rest of the document follows it (then it is the only candidate left), else
        -1."""
        a1 = closed_array(buf, s, at)
        if a1 < 0 or self._doc is None:
            return -1
        head, hi, is_array = self._doc
        got = document_end(buf, a1, hi, head, is_array)
        if not isinstance(got, DocEnd):
            return -1
        self.top = got.top
        self.after = got.after if got.after < hi else -1
        self._it = iter(())
        self.probe = False
        return a1


class DocEnd(NamedTuple):
    """Where a document ends, found from the ``]`` of its event array."""

    top: Trace | None  #: the top level (None for a bare array)
    a1: int  #: the offset of the event array's ``]``
    end: int  #: one past the document's last byte
    after: int  #: the first byte after the document that is not blank (the end of what was looked at: none)


#: :func:`document_end`: the top level goes on past what the buffer holds.
SHORT = "short"
#: How far after the event array the top level is looked at for where the document ends (Kineto writes a few
#: keys there; a longer top level is left to :func:`end_candidates`).
TOP_MAX = 1 << 23


def closed_array(buf: Any, s: int, at: int) -> int:
    """The offset of the ``]`` that closed the array read from the element start ``s``, msgspec having found the
    byte at ``at`` after it (the last byte before ``at`` that is not blank); -1 when that is no ``]``."""
    j = rskip_space(buf, s, min(at, len(buf))) - 1
    return j if j >= s and buf[j] == _RBRACKET else -1


def document_end(buf: Any, a1: int, hi: int, head: bytes, is_array: bool) -> DocEnd | str | None:
    """Where the document whose event array ends with the ``]`` at ``a1`` ends, in ``buf[:hi]``.

    ``head``: the document up to and including the array's ``[``. A :class:`DocEnd`; :data:`SHORT` when the
    top level goes on past ``hi``; None when what follows ``a1`` is not the rest of the top level (``a1`` does
    not end the event array). Whatever follows the document (a second document of a ``cat a b``, garbage) is
    not parsed: only where it starts is found, in one decode of the top level's last keys.
    """
    if is_array:
        return DocEnd(None, a1, a1 + 1, skip_space(buf, a1 + 1, hi))
    stop = min(hi, a1 + 1 + TOP_MAX)
    rest = bytes(buf[a1 + 1 : stop])
    try:
        top = _DEC_TRACE.decode(head + b"]" + rest)
        end = a1 + 1 + len(rest.rstrip(_SPACE))
        after = skip_space(buf, stop, hi)
    except msgspec.ValidationError:
        return None
    except msgspec.DecodeError as exc:
        msg = str(exc)
        if "truncated" in msg:
            return SHORT if stop == hi else None
        m = _BYTE_AT.search(msg)
        if m is None or "trailing characters" not in msg:
            return None
        k = int(m.group(1)) - 2 - len(head)  # the first byte after the document, in rest (msgspec counts it in)
        if not 0 <= k < len(rest):
            return None
        try:
            top = _DEC_TRACE.decode(head + b"]" + rest[:k])
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
        end, after = a1 + 1 + len(rest[:k].rstrip(_SPACE)), a1 + 1 + k
    top.traceEvents = _NULL
    return DocEnd(top, a1, end, after)


def array_closed_at(buf: bytearray, s: int, hi: int) -> int:
    """Whether the array read from the element start ``s`` closes in ``buf[s:hi]``, in one structure-only parse:
    the offset of the first byte msgspec found after its ``]`` (``hi`` when none was read), else -1 (still
    open, or damaged)."""
    before = buf[s - 1]
    buf[s - 1] = _LBRACKET
    try:
        DEC_ARRAY_RAW_EVENTS.decode(memoryview(buf)[s - 1 : hi])
    except msgspec.DecodeError as exc:
        m = _BYTE_AT.search(str(exc))
        if m is not None and "trailing characters" in str(exc):
            return s - 2 + int(m.group(1))
        return -1
    finally:
        buf[s - 1] = before
    return hi


def end_candidates(buf: Any, hi: int, is_array: bool, lo: int, head: bytes) -> Iterator[tuple[Trace | None, int]]:
    """Candidates for the offset of the event array's ``]`` in ``buf[lo:hi]`` (the end of the document),
    last first, each with the top level it implies (None for a bare array).

    ``head`` is the document up to and including the array's ``[``. Kineto
    writes a few keys after the events ("traceName", "baseTimeNanoseconds",
    sometimes log lines or "deviceProperties"): the array ends at a ``]``
    preceded by ``}`` (or ``[``) after which the rest of the object parses.
    Only the chunks can tell which of those is the one.
    """
    # Blank runs are skipped a block at a time (a Python loop per byte took 10 s for 64 MB of them).
    last = max(rskip_space(buf, lo + 1, hi) - 1, lo)
    if is_array:
        if last > lo and buf[last] == _RBRACKET:
            yield None, last
        return
    end = last + 1
    for _ in range(_TAIL_TRIES):
        a1 = _rfind(buf, _RBRACKET, lo + 1, end)
        if a1 < 0:
            return
        end = a1
        k = max(rskip_space(buf, lo + 1, a1) - 1, lo)
        # Blank at lo: only blanks since the start of what is left (after the "[" or whole elements decoded).
        if int(buf[k]) not in b"}[" and not (k == lo and int(buf[k]) in _SPACE):
            continue
        try:
            top = _DEC_TRACE.decode(head + b"]" + bytes(buf[a1 + 1 : hi]))
        except (msgspec.ValidationError, msgspec.DecodeError):
            continue
        top.traceEvents = _NULL
        yield top, a1


def _rfind(buf: Any, sub: int, start: int, end: int) -> int:
    """Offset of the last byte ``sub`` in ``buf[start:end]`` (-1 if none), looking back a window at a time."""
    while end > start:
        lo = max(start, end - (1 << 16))
        i = bytes(buf[lo:end]).rfind(sub)
        if i >= 0:
            return lo + i
        end = lo
    return -1


# --------------------------------------------------------------------------- chunks


def loose_boundary(buf: bytearray, pos: int, hi: int) -> tuple[int, int] | None:
    """(end of a chunk, start of the next) at the first comma from ``pos`` followed, before ``hi``, by
    something other than ``]``: a chunk end between elements that are not objects (no ``}`` boundary), for
    the decode to confirm as any other candidate. None if there is none."""
    k = buf.find(b",", pos, hi)
    while k >= 0:
        nxt = skip_space(buf, k + 1, hi)
        if nxt >= hi:
            return None
        if buf[nxt] != _RBRACKET:
            return k, nxt
        k = buf.find(b",", nxt, hi)
    return None


def skip_filler(buf: bytearray, s: int, hi: int, c: Cols) -> int:
    """From the element start ``s``, skip whitespace and a run of empty objects (counted in ``c`` as a decoded
    ``{}`` is); the offset of what follows (``hi`` at most)."""
    s = skip_space(buf, s, hi)
    s, n = skip_empties(buf, s, hi)
    if n:
        c.n_seen += n
        c.dropped[EMPTY_DROPPED] = c.dropped.get(EMPTY_DROPPED, 0) + n
    return s


def runs_possible(c: Cols) -> bool:
    """Whether runs of empty objects are looked for inside chunks: once the file has shown an event without
    ``ph`` (never, in a profiler's trace, so they cost nothing there; a hostile file gets at most one chunk
    of them decoded before)."""
    return EMPTY_DROPPED in c.dropped


def next_boundary(buf: bytearray, pos: int, a1: int, lo: int | None = None) -> tuple[int, int]:
    """(end of a chunk, start of the next) at the first boundary candidate from ``pos``; with ``lo``, first
    at the start of a run of empty objects in ``buf[lo:pos]`` (the chunk then ends before the run, which the next
    one skips without decoding)."""
    if lo is not None and lo < pos:
        run = empty_run_start(buf, lo, min(pos, a1))
        if run is not None:
            return run
    # Each "}" is found by bytes.find and the whitespace after it skipped by skip_space (memchr / memcmp speed:
    # a regex scans a long run of whitespace at a tenth of that), then the rest of a boundary is checked.
    while pos < a1:
        j = buf.find(b"}", pos, a1)
        if j < 0:
            break
        k = skip_space(buf, j + 1, a1)
        if k < a1 and buf[k] == _COMMA:
            k = skip_space(buf, k + 1, a1)
            if k < a1 and buf[k] == _LBRACE:
                q = skip_space(buf, k + 1, a1)
                if q < a1 and buf[q] in _QUOTE_OR_RBRACE:
                    return j + 1, k
        pos = j + 1
    return a1, a1


def decode_chunk(buf: bytearray, s: int, e: int, c: Cols) -> bool:
    """Decode and collect the events in ``buf[s:e]``; False when ``e`` is not an event boundary (then
    ``c.past_end`` is where msgspec read past the array's own ``]``, when that is why: -1 otherwise)."""
    c.past_end = -1
    if c.mixed and _mixed_chunk(buf, s, e, c):
        return True
    try:
        events = None
        if c.known_cats:
            try:
                events = in_brackets(buf, s, e, _DEC_EVENTS_KNOWN)
            except msgspec.ValidationError:
                c.known_cats = False
        if events is None:
            events = in_brackets(buf, s, e, _DEC_EVENTS)
    except (msgspec.ValidationError, msgspec.DecodeError):
        # Once the first malformed event has been reported (by the raw-slice path, in msgspec's words),
        # elements that are not objects are only counted.
        if c.first_malformed is not None and not c.mixed and _mixed_chunk(buf, s, e, c):
            c.mixed = True
            return True
        try:
            raws = in_brackets(buf, s, e, DEC_ARRAY_RAW_EVENTS)
        except msgspec.DecodeError as exc:
            # From a true event start, a wrong end is only seen at the end (the "]" put there), as input cut
            # short, or as "trailing characters" (a chunk reaching past the array's own "]" into a later list
            # of the top level); msgspec stopping before the end otherwise is damage, which no later end would
            # get past (trying them all was quadratic, issue 34).
            m = _BYTE_AT.search(str(exc))
            if m is not None and "trailing characters" in str(exc):
                c.past_end = s - 2 + int(m.group(1))  # msgspec counts the trailing byte in
            elif m is not None and s - 1 + int(m.group(1)) < e:
                raise Damaged(s - 1 + int(m.group(1)), str(exc)) from None
            return False
        collect_raws(raws, c, _InPlace(buf))
        return True

    def redecode() -> list[Any] | None:
        try:
            return in_brackets(buf, s, e, _DEC_EVENTS_RAWTS)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None

    collect_events(events, c, redecode)
    return True


def whole_elements(buf: bytearray, s: int, e: int) -> bool:
    """Whether ``buf[s:e]`` (``s`` an element start) is whole elements of the array: a structure-only parse."""
    try:
        in_brackets(buf, s, e, DEC_ARRAY_RAW_EVENTS)
    except msgspec.DecodeError:
        return False
    return True


def _mixed_chunk(buf: bytearray, s: int, e: int, c: Cols) -> bool:
    """Decode ``buf[s:e]`` as events and other JSON values, collect the events and count the others as
    malformed; False when that does not decode (a malformed object, damaged strings, not a boundary)."""
    try:
        items = in_brackets(buf, s, e, _DEC_MIXED)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return False
    events = list(filter(_IS_EVENT, items))
    c.n_malformed += len(items) - len(events)
    del items

    def redecode() -> list[Any] | None:
        try:
            return list(filter(_IS_EVENT_RAWTS, in_brackets(buf, s, e, _DEC_MIXED_RAWTS)))
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None

    collect_events(events, c, redecode)
    return True


_IS_EVENT = Event.__instancecheck__
_IS_EVENT_RAWTS = EventRawTs.__instancecheck__


def in_brackets(buf: bytearray, s: int, e: int, dec: msgspec.json.Decoder) -> Any:
    """``dec.decode`` of ``buf[s:e]`` as a JSON array: bytes s-1 and e are ``[`` / ``]`` meanwhile."""
    before, after = buf[s - 1], buf[e]
    buf[s - 1] = _LBRACKET
    buf[e] = _RBRACKET
    try:
        return dec.decode(memoryview(buf)[s - 1 : e + 1])
    finally:
        buf[s - 1] = before
        buf[e] = after


# --------------------------------------------------------------------------- the raw-slice path


def collect_raws(raws: list[msgspec.Raw], c: Cols, inplace: _InPlace | None = None) -> None:
    """Decode undecoded events in batches (repairing damaged strings) and collect them into ``c``."""
    for i in range(0, len(raws), BATCH):
        batch = raws[i : i + BATCH]
        events = _decode_batch(batch, False, c, inplace)

        def redecode(batch: list[msgspec.Raw] = batch, n: int = len(events)) -> list[Any] | None:
            again = _decode_batch(batch, True, c, inplace)
            return again if len(again) == n else None

        collect_events(events, c, redecode)


def split_events(buf: bytes) -> list[msgspec.Raw]:
    """A JSON array of events as undecoded slices ([] when it is not one)."""
    try:
        return DEC_ARRAY_RAW_EVENTS.decode(buf)
    except msgspec.DecodeError:
        return []


class _InPlace:
    """Decodes a run of consecutive raw slices straight from the writable buffer they point into."""

    __slots__ = ("data", "base", "size")

    def __init__(self, data: bytearray) -> None:
        self.data = data
        self.base = buffer_address(data)
        self.size = len(data)

    def decode(self, dec: msgspec.json.Decoder, raws: list[msgspec.Raw]) -> Any:
        """Decode ``raws`` as one JSON array; None when they are not slices of this buffer."""
        s = buffer_address(raws[0]) - self.base
        e = buffer_address(raws[-1]) - self.base + len(raws[-1])
        if not (1 <= s < e < self.size):
            return None
        return in_brackets(self.data, s, e, dec)


def buffer_address(buf: Any) -> int:
    """Address of the first byte of a buffer (to find a slice's offset in the buffer it points into)."""
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data


def _decode_batch(
    raws: list[msgspec.Raw], raw_ts: bool, c: Cols, inplace: _InPlace | None = None
) -> list[Event] | list[EventRawTs]:
    """Decode one batch of events; on a type error decode one by one and skip the bad ones."""
    if not raws:
        return []
    dec = _DEC_EVENTS_RAWTS if raw_ts else _DEC_EVENTS
    if inplace is not None:
        try:
            out = inplace.decode(dec, raws)
            if out is not None:
                return out
        except msgspec.ValidationError:
            return _one_by_one(raws, raw_ts, c)
        except msgspec.DecodeError:
            pass  # damaged strings: repaired on a copy below
    buf = b"[" + b",".join(raws) + b"]"
    repaired = False
    for _attempt in range(3):
        try:
            return dec.decode(buf)
        except msgspec.ValidationError:
            break
        except msgspec.DecodeError as exc:
            # Strings are only validated now (splitting skipped over them).
            fixed = repair(buf, str(exc))
            if fixed is None:
                break
            buf, what, count = fixed
            repaired = True
            if not raw_ts:
                c.repairs[what] = c.repairs.get(what, 0) + count
    if repaired:
        raws = split_events(buf) or raws
    return _one_by_one(raws, raw_ts, c)


def _one_by_one(raws: list[msgspec.Raw], raw_ts: bool, c: Cols) -> list[Event]:
    one = _DEC_EVENT_RAWTS if raw_ts else _DEC_EVENT
    out = []
    for r in raws:
        try:
            out.append(one.decode(r))
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            if not raw_ts:
                c.n_malformed += 1
                if c.first_malformed is None:
                    c.first_malformed = str(exc)
    return out

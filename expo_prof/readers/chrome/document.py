"""A Chrome-trace document in memory: its top level and its event array, decoded a chunk at a time.

The fast path finds the event array by its key and its closing bracket by
looking back from the end of the file (:func:`~expo_prof.readers.chrome.decode.end_candidates`), then
decodes the array chunk by chunk (:func:`collect_array`, also the end of a streamed read,
:mod:`.stream`). Damage inside the array is skipped event by event (:mod:`.damage`); anything else
unusual takes the careful path: one skimming parse of the whole document, which repairs or cuts back
damaged input (:func:`~expo_prof.readers.file_bytes.decode_json`), then the same chunks.
"""

from __future__ import annotations

import gc
from typing import Any

import msgspec

from expo_prof.errors import BadInput
from expo_prof.readers.chrome import decode
from expo_prof.readers.chrome.columns import Cols
from expo_prof.readers.chrome.damage import collect_until_cut, skip_damage
from expo_prof.readers.chrome.filler import rskip_space
from expo_prof.readers.chrome.decode import (
    EVENTS_KEY,
    NON_SPACE,
    Damaged,
    Ends,
    NotAnArray,
    Trace,
    buffer_address,
    decode_chunk,
    end_candidates,
    loose_boundary,
    next_boundary,
    not_json,
    runs_possible,
    skip_filler,
)
from expo_prof.readers.file_bytes import Loaded, decode_json

__all__ = ["after_document", "collect_array", "cut_top", "read_events"]

_DEC_TRACE = msgspec.json.Decoder(Trace)
_DEC_RAW = msgspec.json.Decoder(msgspec.Raw)
_NULL = msgspec.Raw(b"null")
_RBRACKET, _RBRACE = 0x5D, 0x7D


def read_events(data: Any, where: str) -> tuple[Trace | None, Cols, list[str]]:
    """Decode a Chrome-trace document: its top level (None for a bare array) and its events as columns.

    ``data`` should be a bytearray (else it is copied into one): chunks are
    decoded in place, and it is left as it was. A :class:`~expo_prof.readers.file_bytes.Loaded` hands its
    bytes over (:meth:`~expo_prof.readers.file_bytes.Loaded.take`), so that they are freed as soon as a
    cut-back copy replaces them on the careful path. The fast path finds the event
    array by its key and its closing bracket by looking back from the end of
    the file; the document is then only parsed once, chunk by chunk. Anything
    unusual (truncated or damaged JSON, a layout the fast path does not
    recognise) makes it start over on the careful path: one skimming parse of
    the whole document (repairing or cutting back damaged input, see
    :func:`~expo_prof.readers.file_bytes.decode_json`), then the same chunks.
    """
    compressed = False
    if isinstance(data, Loaded):
        compressed = data.compressed
        data = data.take()
    if not isinstance(data, bytearray):
        data = bytearray(data)
    first = NON_SPACE.search(data)
    if first is None:
        raise BadInput(f"{where}: empty file")
    is_array = first.group() == b"["
    a_first = first.start()
    del first  # a match holds on to the buffer it searched
    why = not_json(where, data[a_first], a_first)
    if why is not None:
        raise BadInput(why)
    # Nothing built here forms reference cycles: collections would only re-walk live objects.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        ends = _array_ends(data, is_array, a_first)
        if ends is not None:
            cols = Cols()
            try:
                collect_array(data, ends.a0, ends, cols)
                after = [] if ends.after < 0 else [
                    after_document(where, data[ends.after], ends.after, len(data) - ends.after, compressed)]
                return ends.top, cols, after
            except NotAnArray:
                pass
            got = _cut_short(data, ends.a0, is_array, where)
            if got is not None:
                return got
        top, buf, a0, a1, warnings = _careful_layout(data, where, is_array)
        del data
        cols = Cols()
        try:
            collect_array(buf, a0, Ends(a0, [(top, a1)]), cols)
        except NotAnArray:  # pragma: no cover - the skimming parse accepted this array
            raise BadInput(f"{where}: the event array could not be split into events") from None
        return top, cols, warnings
    finally:
        if gc_was_enabled:
            gc.enable()




def _array_ends(buf: Any, is_array: bool, a_first: int) -> Ends | None:
    """Where the event array starts, and candidates for where it ends, found without parsing the events."""
    if is_array:
        a0 = a_first
    else:
        m = EVENTS_KEY.search(buf)
        if m is None:
            return None
        a0 = m.end() - 1
        del m
    head = bytes(buf[: a0 + 1])
    return Ends(a0, end_candidates(buf, len(buf), is_array, a0, head), (head, len(buf), is_array))


def after_document(where: str, b: int, at: int, left: int | None, compressed: bool) -> str:
    """The warning for what follows the end of a document, from its first byte ``b`` at offset ``at`` on
    (``left`` bytes to the end of the file, when known): it is never read (issue 42)."""
    at_s = f"byte {at:,}" + (" of the decompressed data" if compressed else "")
    rest = "the rest of the file" if left is None else f"the last {left:,} bytes"
    if b in b"{[":
        return (f"{where}: a second JSON document starts at {at_s} (files concatenated?); read the first one only, "
                f"ignored {rest}")
    if b == 0:
        return (f"{where}: NUL bytes from {at_s}, after the end of the JSON document (a file allocated but never "
                f"written: a crash?); ignored {rest}")
    return f"{where}: trailing data after the end of the JSON document, from {at_s}; ignored {rest}"




def _cut_short(data: bytearray, a0: int, is_array: bool, where: str) -> tuple[Trace | None, Cols, list[str]] | None:
    """A document cut short inside its event array (it does not end with its closing bracket, and no ``]`` ends
    the array): the top level from the keys before the array, the events up to the cut with damage skipped
    (:func:`~expo_prof.readers.chrome.damage.collect_until_cut`), the warning; None for anything else (the
    careful path)."""
    last = rskip_space(data, a0, len(data)) - 1
    if last <= a0 or data[last] == (_RBRACKET if is_array else _RBRACE):
        return None
    head = bytes(data[: a0 + 1])
    if next(iter(end_candidates(data, len(data), is_array, a0, head)), None) is not None:
        return None
    top = None
    if not is_array:
        top = cut_top(head)
        if top is None:
            return None
    cols = Cols()
    kept = collect_until_cut(data, a0 + 1, len(data), cols)
    return top, cols, [f"{where}: JSON is truncated; kept the events before byte {kept:,}, skipped the last "
                       f"{len(data) - kept:,} bytes"]


def cut_top(head: bytes) -> Trace | None:
    """The top level of a document cut inside its event array, from ``head`` (up to the array's ``[``); None when
    those keys do not make one."""
    try:
        top = _DEC_TRACE.decode(head + b"]}")
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    top.traceEvents = _NULL
    return top


def _careful_layout(
    data: Any, where: str, is_array: bool
) -> tuple[Trace | None, bytearray, int, int, list[str]]:
    """Skim the whole document (repairing or cutting back damage); returns the writable buffer holding the
    event array and the offsets of its ``[`` and ``]``."""
    dec = _DEC_RAW if is_array else _DEC_TRACE
    try:
        d = decode_json(data, dec, where, container="array" if is_array else "object")
    except msgspec.ValidationError as exc:
        what = "a JSON array of events" if is_array else "a trace object with a traceEvents array"
        raise BadInput(f"{where}: not {what} ({exc})") from None
    top = None if is_array else d.value
    arr = d.value if top is None else top.traceEvents
    if top is not None:
        top.traceEvents = _NULL
    first = memoryview(arr)[:1].tobytes()
    if first == b"n":  # null / absent
        raise BadInput(f"{where}: JSON object without a traceEvents array (not a Chrome/Kineto trace)")
    if first != b"[":
        what = "a JSON array of events" if is_array else "a trace object with a traceEvents array"
        raise BadInput(f"{where}: not {what} (traceEvents is not an array)")
    src = data if d.buffer is None else d.buffer
    if isinstance(src, bytearray):  # the input, or a cut-back copy made writable already
        a0 = buffer_address(arr) - buffer_address(src)
        if 0 <= a0 and a0 + len(arr) <= len(src):
            return top, src, a0, a0 + len(arr) - 1, d.warnings
    # A repaired copy: the array gets its own writable buffer.
    buf = bytearray(arr)
    return top, buf, 0, len(buf) - 1, d.warnings




def collect_array(buf: Any, a0: int, ends: Ends, c: Cols, start: int | None = None, base: int = 0) -> None:
    """Decode the events of the JSON array starting with the ``[`` at ``a0`` into ``c``.

    ``start`` (an event start; default the first) is where decoding begins; ``base``: the offset of ``buf[0]``
    in the file (for the messages).
    The array ends at the first of ``ends``' candidates that a chunk confirms;
    raises NotAnArray when none does.
    """
    s = a0 + 1 if start is None else start
    a1 = ends.next(s)
    while s < a1:
        s = skip_filler(buf, s, a1, c)
        if s >= a1:
            break
        lo = s + 1 if runs_possible(c) else None
        e, nxt = next_boundary(buf, s + decode.CHUNK_BYTES, a1, lo)
        reach = decode.CHUNK_BYTES
        while True:
            if e >= a1 and a1 - s > 2 * reach:
                # No "}" boundary up to a far end: elements that are not objects? A comma, further each time.
                got = loose_boundary(buf, s + reach, a1)
                if got is not None:
                    e, nxt = got
                    reach = max(2 * reach, e + 1 - s)
            try:
                if decode_chunk(buf, s, e, c):
                    if ends.probe and e >= a1:
                        raise NotAnArray  # the array runs to the last byte: it does not end there
                    break
            except Damaged as d:
                nxt = skip_damage(buf, s, d, a1, c, base)
                break
            if c.past_end >= 0:
                # The chunk read past the array's own "]": when the rest of the document follows it, that is the
                # end (a later "]" of the top level, or of a second document of a `cat a b`, is never tried).
                j = ends.close(buf, s, c.past_end)
                if 0 <= j < a1:
                    a1 = j
                    e, nxt = next_boundary(buf, s + decode.CHUNK_BYTES, a1, lo)
                    continue
            if e >= a1:
                # Not the end of the array (a later list of the top level): the next candidate.
                a1 = ends.next(s)
                e, nxt = next_boundary(buf, s + decode.CHUNK_BYTES, a1, lo)
            else:
                e, nxt = next_boundary(buf, e + 1, a1)
        s = nxt
    if ends.probe:
        raise NotAnArray  # no chunk read past the array's "]": it does not end before the last byte



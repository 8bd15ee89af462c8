"""Decoding a Chrome-trace file while reading it: the whole file is never in memory.

The event array is decoded chunk by chunk (:mod:`.decode`) straight
from a :class:`~expo_prof.readers.chrome.window.Window` that holds only the bytes not
decoded yet. The beginning of the document up to the array's ``[`` is kept
(the top-level keys Kineto writes first: ``deviceProperties``,
``distributedInfo``); once the file is all read, the window holds the last
events and the keys written after the array (``traceName``,
``baseTimeNanoseconds``), and the array's end is found as in the in-memory
path (:func:`~expo_prof.readers.chrome.decode.end_candidates`).

Damaged or unusual input (the array not found in the first 8 MB, JSON that is
cut or broken, gzip data that is cut, corrupt or followed by garbage) returns None: the caller then
reads the whole file and takes the careful path, which repairs what can be
repaired and says what was lost.
"""

from __future__ import annotations

import gc
from pathlib import Path

from expo_prof.readers.chrome import decode
from expo_prof.readers.chrome.columns import Cols
from expo_prof.readers.chrome.decode import (
    EVENTS_KEY,
    NON_SPACE,
    Ends,
    NotAnArray,
    Trace,
    collect_array,
    decode_chunk,
    end_candidates,
    next_boundary,
)
from expo_prof.readers.chrome.window import DamagedGzip, Window
from expo_prof.readers.file_bytes import Progress

__all__ = ["stream_events"]

#: Give up looking for the start of the event array past this many bytes.
_HEAD_MAX = 1 << 23
#: A boundary may straddle the end of what has been read: look again from this far back.
_OVERLAP = 4096
#: Bytes read past a chunk's target end before its end (the next event boundary) is looked for (at most
#: one chunk). Small: what is read ahead is moved to the window's front at every refill.
_LOOKAHEAD = 1 << 16


def stream_events(
    path: Path, *, max_bytes: int, progress: Progress | None = None
) -> tuple[Trace | None, Cols, list[str]] | None:
    """Top level (None for a bare array), events as columns and reading warnings; None for the careful path."""
    with Window(path, max_bytes=max_bytes, progress=progress) as w:
        # Nothing built here forms reference cycles: collections would only re-walk live objects.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return _stream(w)
        except (NotAnArray, DamagedGzip):
            return None
        finally:
            if gc_was_enabled:
                gc.enable()


def _stream(w: Window) -> tuple[Trace | None, Cols, list[str]] | None:
    # The head: the first non-blank byte tells an object from a bare array;
    # an object's event array starts after its "traceEvents" key.
    while True:
        first = NON_SPACE.search(w.buf, 0, w.hi)
        if first is not None or w.hi >= _HEAD_MAX or not w.more(0):
            break
    if first is None:
        return None
    is_array = first.group() == b"["
    a0 = first.start()
    del first  # a match holds on to the buffer it searched
    while not is_array:
        m = EVENTS_KEY.search(w.buf, 0, w.hi)
        if m is not None:
            a0 = m.end() - 1
            del m
            break
        if w.hi >= _HEAD_MAX or not w.more(0):
            return None
    head = bytes(w.buf[: a0 + 1])  # nothing was dropped yet: window offsets are file offsets
    c = Cols()
    # Absolute offsets: s = start of the first event not decoded, pos = where its chunk's end is looked for.
    chunk = decode.CHUNK_BYTES
    look = min(chunk, _LOOKAHEAD)
    s = a0 + 1
    pos = s + chunk
    while True:
        while w.base + w.hi < pos + look and w.more(s - 1 - w.base):
            pass
        e, nxt = next_boundary(w.buf, pos - w.base, w.hi)
        if e < w.hi:
            if decode_chunk(w.buf, s - w.base, e, c):
                s = nxt + w.base
                pos = s + chunk
            else:  # not an event boundary: the next candidate
                pos = e + 1 + w.base
        else:  # no boundary in what has been read: read more, and look again from a little before its end
            end = w.base + w.hi
            if not w.more(s - 1 - w.base):
                break
            pos = max(pos, end - _OVERLAP)
    # The end of the file is in the window: the last events, the array's "]" and the keys after it.
    lo = s - 1 - w.base
    ends = Ends(lo, end_candidates(w.buf, w.hi, is_array, lo, head))
    collect_array(w.buf, lo, ends, c, start=s - w.base)
    return ends.top, c, w.warnings

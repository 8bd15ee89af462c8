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

What can never count is not held (issue 27, :mod:`.filler`): whitespace before
the document is dropped as it is read, whitespace and runs of ``{}`` at a chunk
start are skipped, a long blank run at the end of what has been read is
dropped once what precedes it is known to be whole elements
(:func:`_cut_blank_tail`), elements that are not objects end chunks at commas
(:func:`~expo_prof.readers.chrome.decode.loose_boundary`), and gzip input
whose array is not found in the first 8 MB is inflated to its end without being
kept before the careful path (:func:`_drain`): a bomb is refused at the size cap
in one window.
"""

from __future__ import annotations

import gc
from pathlib import Path

from expo_prof.errors import BadInput
from expo_prof.readers.chrome import decode
from expo_prof.readers.chrome.columns import Cols
from expo_prof.readers.chrome.damage import Damage, before_damage, collect_until_cut
from expo_prof.readers.chrome.document import after_document, collect_array, cut_top
from expo_prof.readers.chrome.decode import (
    EVENTS_KEY,
    Damaged,
    DocEnd,
    Ends,
    NotAnArray,
    Trace,
    array_closed_at,
    closed_array,
    decode_chunk,
    document_end,
    end_candidates,
    loose_boundary,
    next_boundary,
    not_json,
    runs_possible,
    skip_filler,
    whole_elements,
)
from expo_prof.readers.chrome.filler import rskip_space, skip_space
from expo_prof.readers.chrome.window import DamagedGzip, Window
from expo_prof.readers.file_bytes import Progress, _mb

__all__ = ["stream_events"]

#: Give up looking for the start of the event array past this many bytes.
_HEAD_MAX = 1 << 23
#: A boundary may straddle the end of what has been read: look again from this far back.
_OVERLAP = 4096
#: Bytes read past a chunk's target end before its end (the next event boundary) is looked for (at most
#: one chunk). Small: what is read ahead is moved to the window's front at every refill.
_LOOKAHEAD = 1 << 16
#: Filler (whitespace, empty objects) that reaches this close to the end of what has been read may go on
#: after it: read more and skip again.
_SLACK = 1 << 12
_LBRACKET, _RBRACE = 0x5B, 0x7D
#: A damaged stretch whose next event start is not found within this many bytes is counted and dropped.
_HOLD_DAMAGE = 1 << 23
#: A run of whitespace at least this long at the end of what has been read is dropped when it is known to sit
#: between tokens (:func:`_cut_blank_tail`).
_BLANK_TAIL = 1 << 16
#: ``]`` tried as the end of the event array before a blank run after it (the last events' args hold a few).
_ARRAY_END_TRIES = 8
#: A run of at least this many NUL bytes at the end of what has been read, where the JSON goes on, ends the data
#: (issue 42: the unwritten end of a file after a crash; a NUL byte is never valid JSON, a stray one is damage).
_NUL_RUN = 1 << 16
_NUL_WHY = "(a file allocated but never written: a crash?)"


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
    # The head: the first non-blank byte tells an object from a bare array; whitespace before it is dropped as
    # it is read (a gzip bomb of whitespace costs one window, and is refused at the size cap).
    while True:
        i = skip_space(w.buf, 0, w.hi)
        if i < w.hi:
            break
        try:
            if not w.more(w.hi):
                raise BadInput(f"{w.path}: empty file")
        except DamagedGzip as exc:
            if not w.base + w.hi:
                raise  # nothing inflated: the careful path says what is wrong with the gzip data
            # The careful path would hold all that whitespace to find that it holds nothing else.
            raise BadInput(f"{w.path}: empty file ({_mb(w.base + w.hi)} of whitespace, then damaged gzip data: "
                           f"{exc})") from None
    d0 = w.base + i  # absolute offsets from here on (window offset + w.base)
    why = not_json(str(w.path), w.buf[i], d0)
    if why is not None:
        raise BadInput(why)  # NUL bytes or other binary: refused from the first window (issue 42)
    is_array = w.buf[i] == _LBRACKET
    a0 = d0
    # An object's event array starts after its "traceEvents" key.
    while not is_array:
        m = EVENTS_KEY.search(w.buf, d0 - w.base, w.hi)
        if m is not None:
            a0 = w.base + m.end() - 1
            del m  # a match holds on to the buffer it searched
            break
        # A long blank run at the end of the head is kept as one blank (issue 34: 128 MB of spaces before the
        # "traceEvents" key were held, then read whole on the careful path: 575 MB). Only the top-level
        # keys before the array are in the head; a string there holding such a run is not a profiler's.
        t = rskip_space(w.buf, d0 - w.base, w.hi)
        if w.hi - t >= _BLANK_TAIL:
            w.hi = t + 1
        nul = _nul_tail(w.buf, d0 - w.base, w.hi)
        if nul >= 0:  # (the careful path would read the whole file to find no array in it)
            raise BadInput(f"{w.path}: not valid JSON: NUL bytes from byte {w.base + nul:,} {_NUL_WHY}, before any "
                           "traceEvents array")
        if w.base + w.hi - d0 >= _HEAD_MAX:
            _drain(w)
            return None
        if not w.more(d0 - w.base):
            return None
    head = bytes(w.buf[d0 - w.base : a0 - w.base + 1])
    c = Cols()
    # s = start of the first event not decoded, pos = where its chunk's end is looked for, lo = where the start
    # of a run of empty objects is looked for (before pos).
    chunk = decode.CHUNK_BYTES
    look = min(chunk, _LOOKAHEAD)
    s = _skip(w, a0 + 1, c)
    pos, lo = s + chunk, s + 1
    tail_try = _BLANK_TAIL  # the pending bytes past which a blank tail is looked for (doubles when none is cut)
    reach = chunk  # where a comma is looked for as a chunk end when no "}" boundary comes (doubles on failure)
    known = -1  # the last byte before a blank tail dropped already (what precedes it was found whole)
    end_try = 2 * chunk  # the pending bytes past which the array's end is looked for (doubles when not found)
    dmg: Damage | None = None  # damage found, the next event start not found yet (s = where the damage starts)
    while True:
        if dmg is not None:
            k = dmg.resync(w.buf, w.hi, c, final=False, base=w.base)
            if k is None:
                if w.base + w.hi - s > _HOLD_DAMAGE and dmg.pos - 1 > s:
                    # A long damaged stretch (every event broken): counted so far, and no longer held.
                    dmg.commit(w.buf, c, w.base)
                    s = dmg.ds
                if not w.more(s - 1 - w.base):
                    break  # the end of the array: collect_array skips the rest of the damage
                continue
            dmg = None
            s = _skip(w, k, c)
            pos, lo, reach = s + chunk, s + 1, chunk
        while w.base + w.hi < pos + look and w.more(s - 1 - w.base):
            pass
        e, nxt = next_boundary(w.buf, pos - w.base, w.hi, lo - w.base if runs_possible(c) else None)
        if e < w.hi:
            try:
                ok = decode_chunk(w.buf, s - w.base, e, c)
            except Damaged as d:
                s = before_damage(w.buf, s - w.base, d.at, c) + w.base
                dmg = Damage(s, d.at + w.base, d.msg)
                continue
            if ok:
                s = _skip(w, nxt + w.base, c)
                pos, lo, reach, end_try = s + chunk, s + 1, chunk, 2 * chunk
            else:  # not an event boundary: the next candidate
                doc = _doc_end(w, s, c.past_end, head, is_array) if c.past_end >= 0 else None
                if doc is not None:  # the chunk read past the end of the document: what follows is not read
                    return _finish(w, s, doc, c)
                pos = lo = e + 1 + w.base
        else:  # no boundary in what has been read: read more, and look again from a little before its end
            if w.base + w.hi - s > 2 * reach:
                # Elements that are not objects (no "}" boundary)? A comma as the chunk end, further each time.
                got = loose_boundary(w.buf, s + reach - w.base, w.hi)
                try:
                    ok = got is not None and decode_chunk(w.buf, s - w.base, got[0], c)
                except Damaged as d:
                    s = before_damage(w.buf, s - w.base, d.at, c) + w.base
                    dmg = Damage(s, d.at + w.base, d.msg)
                    continue
                if ok and got is not None:
                    s = _skip(w, got[1] + w.base, c)
                    pos, lo, reach, end_try = s + chunk, s + 1, chunk, 2 * chunk
                    continue
                doc = _doc_end(w, s, c.past_end, head, is_array) if got is not None and c.past_end >= 0 else None
                if doc is not None:
                    return _finish(w, s, doc, c)
                reach = max(2 * reach, got[0] + 1 + w.base - s if got is not None else 0)
            if w.base + w.hi - s >= tail_try:
                kept = _cut_blank_tail(w, s, head, is_array, known)
                if kept is None:
                    tail_try = 2 * (w.base + w.hi - s)
                else:
                    known = kept
                    pos, lo = min(pos, kept), min(lo, kept)
            if w.base + w.hi - s >= end_try:
                # A long stretch without a boundary: the end of the array, then what follows the document (NUL
                # bytes, garbage) would be held to the end of the file. One structure-only parse says (issue 42).
                at = array_closed_at(w.buf, s - w.base, w.hi)
                doc = _doc_end(w, s, at, head, is_array) if at >= 0 else None
                if doc is not None:
                    return _finish(w, s, doc, c)
                nul = _nul_tail(w.buf, s - w.base, w.hi)
                cut = _cut_by_nul(w, s, nul, head, is_array, c) if nul >= 0 else None
                if cut is not None:
                    return cut
                end_try = 2 * (w.base + w.hi - s)
            end = w.base + w.hi
            if not w.more(s - 1 - w.base):
                break
            pos = max(pos, end - _OVERLAP)
            lo = max(lo, end - _OVERLAP)
    # The end of the file is in the window: the last events, the array's "]" and the keys after it.
    if dmg is None:
        at = array_closed_at(w.buf, s - w.base, w.hi)
        doc = _doc_end(w, s, at, head, is_array) if at >= 0 else None
        if doc is not None:
            return _finish(w, s, doc, c)
    lo = s - 1 - w.base
    ends = Ends(lo, end_candidates(w.buf, w.hi, is_array, lo, head), (head, w.hi, is_array))
    collect_array(w.buf, lo, ends, c, start=s - w.base, base=w.base)
    warnings = list(w.warnings)
    if ends.after >= 0:
        warnings.append(_after(w, ends.after, 0))
    return ends.top, c, warnings


def _doc_end(w: Window, s: int, at: int, head: bytes, is_array: bool) -> DocEnd | None:
    """Where the document ends (absolute offsets), the array read from the element start ``s`` having closed
    before the window offset ``at``; None when that is not settled by what has been read."""
    a1 = closed_array(w.buf, s - w.base, at)
    got = document_end(w.buf, a1, w.hi, head, is_array) if a1 >= 0 else None
    if not isinstance(got, DocEnd):
        return None
    return DocEnd(got.top, got.a1 + w.base, got.end + w.base, got.after + w.base)


def _nul_tail(buf: bytearray, lo: int, hi: int) -> int:
    """Where a run of at least :data:`_NUL_RUN` NUL bytes that goes on to ``hi`` starts in ``buf[lo:hi]``; -1
    when there is none."""
    if hi - lo < _NUL_RUN or buf[hi - 1] != 0:
        return -1
    k = hi
    while k > lo:
        j = max(lo, k - _NUL_RUN)
        kept = len(bytes(buf[j:k]).rstrip(b"\0"))
        if kept:
            k = j + kept
            break
        k = j
    return k if hi - k >= _NUL_RUN else -1


def _cut_by_nul(w: Window, s: int, k: int, head: bytes, is_array: bool, c: Cols) -> tuple[Trace | None, Cols,
                                                                                          list[str]] | None:
    """The event array cut by NUL bytes from the window offset ``k`` on (the rest of the file is not read): the
    top level from the keys before the array, the events up to the cut, damage skipped (as
    :func:`~expo_prof.readers.chrome.document.read_events` does for a file cut short); None when the keys before
    the array do not make a top level (the careful path)."""
    top = None
    if not is_array:
        top = cut_top(head)
        if top is None:
            return None
    kept = w.base + collect_until_cut(w.buf, s - w.base, k, c)
    rest = "the rest of the file" if w.compressed else f"the last {w.size - kept:,} bytes"
    return top, c, [*w.warnings, f"{w.path}: JSON is truncated by NUL bytes from byte {w.base + k:,} {_NUL_WHY}; "
                                 f"kept the events before byte {kept:,}, skipped {rest}"]


def _finish(w: Window, s: int, doc: DocEnd, c: Cols) -> tuple[Trace | None, Cols, list[str]]:
    """The events from ``s`` to the end of the event array, the document's end being known: whatever follows it
    is not read (a second document of a ``cat a b``, garbage, NUL bytes: one warning naming where it starts)."""
    after, dropped = doc.after, 0
    while after >= w.base + w.hi:  # only blanks after the document so far: dropped, and the next bytes read
        dropped += w.base + w.hi - doc.end
        w.hi = doc.end - w.base
        if not w.more(s - 1 - w.base):
            after = -1
            break
        after = w.base + skip_space(w.buf, doc.end - w.base, w.hi)
    warnings = list(w.warnings)
    if after >= 0:
        warnings.append(_after(w, after - w.base, dropped))
    lo = s - 1 - w.base
    ends = Ends(lo, [(doc.top, doc.a1 - w.base)])
    collect_array(w.buf, lo, ends, c, start=s - w.base, base=w.base)
    return ends.top, c, warnings


def _after(w: Window, i: int, dropped: int) -> str:
    """:func:`~expo_prof.readers.chrome.document.after_document` for the byte ``buf[i]`` of the window
    (``dropped`` blank bytes before it were dropped from the window)."""
    at = w.base + i + dropped
    return after_document(str(w.path), w.buf[i], at, None if w.compressed else w.size - at, w.compressed)


def _skip(w: Window, s: int, c: Cols) -> int:
    """:func:`~expo_prof.readers.chrome.decode.skip_filler` from the absolute offset ``s``, reading on (and
    dropping what was skipped) while the filler reaches the end of what has been read."""
    while True:
        i = skip_filler(w.buf, s - w.base, w.hi, c)
        s = w.base + i
        if w.hi - i >= _SLACK or not w.more(s - 1 - w.base):
            return s


def _cut_blank_tail(w: Window, s: int, head: bytes, is_array: bool, known: int) -> int | None:
    """Drop a long run of whitespace at the end of what has been read, where it is known to sit between tokens.

    That is when the bytes from ``s`` (an element start) up to the run are whole elements (the run follows an
    element, or its comma, or the array's ``]``: a structure-only parse says so), or the whole rest of the
    document (one of :func:`~expo_prof.readers.chrome.decode.end_candidates`): such whitespace means nothing
    and would otherwise be held until a boundary or the end of the file comes (a whitespace bomb after the
    events). ``known``: the absolute offset of a byte found so before (nothing is parsed again while the run
    still follows it). Returns the absolute offset of the last byte before the run when it was dropped, else
    None.
    """
    i0 = s - w.base
    t = rskip_space(w.buf, i0, w.hi)
    if t <= i0 or w.hi - t < _BLANK_TAIL:
        return None
    x = t - 1
    if w.base + x == known:
        w.hi = t + 1
        return known
    y = x if w.buf[x] == _RBRACE else rskip_space(w.buf, i0, x) - 1
    ok = y >= i0 and w.buf[y] == _RBRACE and w.buf[x] in b"},]" and whole_elements(w.buf, i0, y + 1)
    if not ok and w.buf[x] in b"]}":
        # The array may have ended before the run: the document is then complete up to it.
        ok = any(whole_elements(w.buf, i0, a1)
                 for _top, a1 in end_candidates(w.buf, t, is_array, i0 - 1, head) if a1 >= i0)
    if not ok:
        # After the event array's "]" (in a key or value of the top level after it, a string's included): such a
        # run was held whole to the end of the file (issue 34: 256 MB of spaces in "traceName" or between the
        # elements of "deviceProperties" took 1.09 GB). A run of blanks there changes nothing the reader takes.
        ok = _after_the_array(w.buf, i0, x)
    if not ok:
        return None
    w.hi = t + 1  # one blank kept: what follows is read after it
    return w.base + x


def _after_the_array(buf: bytearray, i0: int, x: int) -> bool:
    """Whether the event array ends in ``buf[i0:x + 1]`` (``i0`` an element start): one of its first ``]`` ends
    whole elements and is followed by the top level's ``,`` or ``}``."""
    j = buf.find(b"]", i0, x + 1)
    for _ in range(_ARRAY_END_TRIES):
        if j < 0:
            return False
        k = skip_space(buf, j + 1, x + 1)
        if k <= x and buf[k] in b",}" and whole_elements(buf, i0, j):
            return True
        j = buf.find(b"]", j + 1, x + 1)
    return False


def _drain(w: Window) -> None:
    """Inflate the rest of a gzip input without keeping it, so that a bomb is refused at the size cap in one
    window before the careful path (which holds the whole file) starts."""
    if w.compressed:
        while w.more(w.hi):
            pass

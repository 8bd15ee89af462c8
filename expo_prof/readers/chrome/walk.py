"""The one walk over a Chrome trace's event array, a window at a time: the reader's and the export's.

Both the reader (:mod:`.stream`: events decoded into columns) and the export
(:mod:`expo_prof.export.raw_trace`: every event passed through as undecoded
bytes) read a trace the same way, through a
:class:`~expo_prof.readers.chrome.window.Window` that holds only the bytes not
taken yet. :class:`ArrayWalk` is that walk; what is done with the elements is
left to its subclass (the hooks below):

* the head: whitespace before the document is dropped as it is read, the first
  byte that is not blank tells an object from a bare array (NUL bytes or other
  binary are refused from the first window, issue 42), and an object's event
  array starts after its ``"traceEvents"`` key, within the first 8 MB; a long
  blank run in the head is kept as one blank (issue 34);
* the array, a chunk at a time: a chunk ends at an event boundary
  (:func:`~expo_prof.readers.chrome.decode.next_boundary`, or a comma between
  elements that are not objects: :func:`~expo_prof.readers.chrome.decode.loose_boundary`)
  once it holds about :data:`~expo_prof.readers.chrome.decode.CHUNK_BYTES`, and
  is handed to :meth:`ArrayWalk.chunk`, which says whether it ended at a true
  boundary (it decodes only then);
* blanks, which never count (issue 27): filler at an element start is skipped
  (:meth:`ArrayWalk.skip`), a long blank run at the end of what has been read is
  dropped once what precedes it is known to be whole elements or the rest of the
  document (:meth:`ArrayWalk._cut_blank_tail`), and blanks after the document
  are dropped as they are read (:meth:`ArrayWalk._finish`): a trailing blank
  tail, however long, is accepted and never held;
* the end: once the array's ``]`` and the rest of the document are known
  (a chunk that read past the array, a structure-only parse over a long stretch
  without a boundary, or the end of the file), :meth:`ArrayWalk.close` takes the
  last elements and whatever follows the document (a second document, garbage,
  NUL bytes: never read, only where it starts is said); a run of NUL bytes where
  the JSON goes on ends the data (:meth:`ArrayWalk.cut_by_nul`).

:meth:`ArrayWalk.pieces` is a generator: it yields what :meth:`ArrayWalk.chunk`
made of each chunk (one at a time: the export streams them) and returns what
:meth:`ArrayWalk.close` (or :meth:`ArrayWalk.at_eof`) made of the end, or None
when the head holds no event array (:meth:`ArrayWalk.no_array`) or a cut by NUL
bytes gave nothing (the reader's careful path).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Generic, TypeVar

from expo_prof.errors import BadInput
from expo_prof.readers.chrome import decode
from expo_prof.readers.chrome.damage import Damage
from expo_prof.readers.chrome.decode import (
    EVENTS_KEY,
    Damaged,
    DocEnd,
    array_closed_at,
    closed_array,
    document_end,
    end_candidates,
    loose_boundary,
    next_boundary,
    not_json,
    whole_elements,
)
from expo_prof.readers.chrome.filler import rskip_space, skip_space
from expo_prof.readers.chrome.window import DamagedGzip, Window
from expo_prof.readers.file_bytes import _mb

__all__ = ["HEAD_MAX", "NUL_WHY", "ArrayWalk", "DocEnd"]

#: Give up looking for the start of the event array past this many bytes.
HEAD_MAX = 1 << 23
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
#: between tokens (:meth:`ArrayWalk._cut_blank_tail`).
_BLANK_TAIL = 1 << 16
#: ``]`` tried as the end of the event array before a blank run after it (the last events' args hold a few).
_ARRAY_END_TRIES = 8
#: A run of at least this many NUL bytes at the end of what has been read, where the JSON goes on, ends the data
#: (issue 42: the unwritten end of a file after a crash; a NUL byte is never valid JSON, a stray one is damage).
_NUL_RUN = 1 << 16
#: What a run of NUL bytes where the JSON goes on likely is, for the messages.
NUL_WHY = "(a file allocated but never written: a crash?)"

#: What :meth:`ArrayWalk.chunk` makes of a chunk.
T = TypeVar("T")
#: What :meth:`ArrayWalk.close` and :meth:`ArrayWalk.at_eof` make of the end of the array.
R = TypeVar("R")


class _Cursor:
    """Where a walk stands in the event array (absolute offsets: window offset + ``base``)."""

    __slots__ = ("dmg", "end_try", "known", "lo", "pos", "reach", "s", "tail_try")

    def __init__(self, s: int, chunk: int) -> None:
        #: The start of the first element not taken yet.
        self.s = s
        #: Where the chunk's end is looked for; where a run of empty objects is looked for (before ``pos``).
        self.pos, self.lo = s + chunk, s + 1
        #: The pending bytes past which a blank tail is looked for (doubles when none is cut).
        self.tail_try = _BLANK_TAIL
        #: Where a comma is looked for as a chunk end when no "}" boundary comes (doubles on failure).
        self.reach = chunk
        #: The last byte before a blank tail dropped already (what precedes it was found whole).
        self.known = -1
        #: The pending bytes past which the array's end is looked for (doubles when not found).
        self.end_try = 2 * chunk
        #: Damage found, the next element start not found yet (``s`` = where the damage starts).
        self.dmg: Damage | None = None

    def took(self, s: int, chunk: int) -> None:
        """A chunk was taken: the next one starts at ``s``."""
        self.s = s
        self.pos, self.lo, self.reach, self.end_try = s + chunk, s + 1, chunk, 2 * chunk

    def resumed(self, s: int, chunk: int) -> None:
        """Past a damaged stretch: the next chunk starts at ``s``."""
        self.dmg = None
        self.s = s
        self.pos, self.lo, self.reach = s + chunk, s + 1, chunk


class ArrayWalk(Generic[T, R]):
    """One walk over the event array of the Chrome trace in the window ``w`` (see the module docstring).

    A subclass says what becomes of the elements: :meth:`chunk` (required), :meth:`close` and :meth:`at_eof`
    (required), and, where the default does not fit, :meth:`skip`, :meth:`runs_possible`, :meth:`past_end`,
    :meth:`no_array`, :meth:`cut_by_nul` and the damage hooks (:meth:`damaged`, :meth:`resync`, :meth:`commit`).
    Offsets handed to the hooks are window offsets (into ``w.buf``) unless a name says otherwise; ``head`` and
    ``is_array`` hold the document up to the array's ``[`` and whether it is a bare array once the head is read.
    """

    def __init__(self, w: Window) -> None:
        self.w = w
        self.head = b""
        self.is_array = False

    # ------------------------------------------------------------------------------------------- the hooks

    def chunk(self, i: int, e: int, nxt: int) -> T | None:
        """Take the elements ``w.buf[i:e]`` (``i`` an element start; ``nxt`` the next one, after the separator):
        what was made of them, or None when ``e`` is no element boundary (then :meth:`past_end` says where the
        parse read past the array's own ``]``, when that is why). Raises
        :class:`~expo_prof.readers.chrome.decode.Damaged` for damage before ``e``, which no later end would get
        past."""
        raise NotImplementedError

    def close(self, i: int, doc: DocEnd, after: int, dropped: int) -> R:
        """The end of the document is known (``doc``, absolute offsets): take the elements from the window offset
        ``i`` to the array's ``]``. ``after``: the window offset of the first byte after the document that is not
        blank (-1: none; ``dropped`` blank bytes before it were dropped from the window)."""
        raise NotImplementedError

    def at_eof(self, i: int) -> R | None:
        """The end of the file is in the window, the array's end not settled by the walk (a document cut short,
        damaged, or whose top level the walk does not take): the elements from the window offset ``i`` on and
        what follows them."""
        raise NotImplementedError

    def skip(self, i: int) -> int:
        """From the element start ``i``, skip what can never count (default: whitespace); the window offset of
        what follows (``w.hi`` at most)."""
        return skip_space(self.w.buf, i, self.w.hi)

    def runs_possible(self) -> bool:
        """Whether a chunk ends before a run of empty objects inside it (default: never)."""
        return False

    def past_end(self) -> int:
        """Where the last chunk that was no boundary read past the array's own ``]`` (the window offset of the
        first byte after it; -1: it did not)."""
        return -1

    def no_array(self) -> R | None:
        """The head holds no event array in its first 8 MB, or the file ends first (default: None)."""
        return None

    def cut_by_nul(self, i: int, k: int) -> R | None:
        """The array, from the element start ``i``, is cut by NUL bytes from the window offset ``k`` on (the rest
        of the file is not read); None: the walk goes on (default)."""
        return None

    def damaged(self, i: int, d: Damaged) -> Damage:
        """Damage in the chunk from the element start ``i``: take the elements before it and say where the damaged
        stretch starts (default: the damage is raised)."""
        raise d

    def resync(self, dmg: Damage) -> int | None:
        """The absolute offset of the first element start after the damage, or None: not found in what has been
        read."""
        raise NotImplementedError

    def commit(self, dmg: Damage) -> None:
        """Count a long damaged stretch so far, so that it is no longer held."""
        raise NotImplementedError

    # -------------------------------------------------------------------------------------------- the walk

    def pieces(self) -> Generator[T, None, R | None]:
        """Walk the document: yield what :meth:`chunk` made of each chunk, return what :meth:`close` (or
        :meth:`at_eof`, :meth:`cut_by_nul`, :meth:`no_array`) made of the end."""
        w = self.w
        a0 = self._find_array()
        if a0 < 0:
            return self.no_array()
        chunk = decode.CHUNK_BYTES
        look = min(chunk, _LOOKAHEAD)
        cur = _Cursor(self._skip(a0 + 1), chunk)
        while True:
            if cur.dmg is not None and not self._past_damage(cur, chunk):
                break  # the end of the array: the end hooks skip the rest of the damage
            while w.base + w.hi < cur.pos + look and w.more(cur.s - 1 - w.base):
                pass
            lo = cur.lo - w.base if self.runs_possible() else None
            e, nxt = next_boundary(w.buf, cur.pos - w.base, w.hi, lo)
            if e < w.hi:
                got = self._try(cur, e, nxt)
                if cur.dmg is not None:
                    continue
                if got is not None:
                    yield got
                    cur.took(self._skip(nxt + w.base), chunk)
                    continue
                # Not an event boundary: the next candidate, unless the chunk read past the end of the document
                # (what follows is not read).
                doc = self._doc_end(cur.s, self.past_end()) if self.past_end() >= 0 else None
                if doc is not None:
                    return self._finish(cur.s, doc)
                cur.pos = cur.lo = e + 1 + w.base
                continue
            # No boundary in what has been read: read more, and look again from a little before its end.
            if w.base + w.hi - cur.s > 2 * cur.reach:
                loose = yield from self._loose(cur, chunk)
                if isinstance(loose, _End):
                    return loose.result
                if loose:
                    continue
            if w.base + w.hi - cur.s >= cur.tail_try:
                kept = self._cut_blank_tail(cur.s, cur.known)
                if kept is None:
                    cur.tail_try = 2 * (w.base + w.hi - cur.s)
                else:
                    cur.known = kept
                    cur.pos, cur.lo = min(cur.pos, kept), min(cur.lo, kept)
            if w.base + w.hi - cur.s >= cur.end_try:
                ended = self._try_end(cur)
                if ended is not None:
                    return ended.result
            end = w.base + w.hi
            if not w.more(cur.s - 1 - w.base):
                break
            cur.pos = max(cur.pos, end - _OVERLAP)
            cur.lo = max(cur.lo, end - _OVERLAP)
        # The end of the file is in the window: the last elements, the array's "]" and the keys after it.
        if cur.dmg is None:
            at = array_closed_at(w.buf, cur.s - w.base, w.hi)
            doc = self._doc_end(cur.s, at) if at >= 0 else None
            if doc is not None:
                return self._finish(cur.s, doc)
        return self.at_eof(cur.s - w.base)

    def _find_array(self) -> int:
        """Read the head: set :attr:`head` and :attr:`is_array`; the absolute offset of the event array's ``[``,
        or -1 when it is not found in the first 8 MB (or before the end of the file)."""
        w = self.w
        # The first non-blank byte tells an object from a bare array; whitespace before it is dropped as it is
        # read (a gzip bomb of whitespace costs one window, and is refused at the size cap).
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
                raise BadInput(f"{w.path}: empty file ({_mb(w.base + w.hi)} of whitespace, then damaged gzip "
                               f"data: {exc})") from None
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
                raise BadInput(f"{w.path}: not valid JSON: NUL bytes from byte {w.base + nul:,} {NUL_WHY}, before "
                               "any traceEvents array")
            if w.base + w.hi - d0 >= HEAD_MAX or not w.more(d0 - w.base):
                return -1
        self.head = bytes(w.buf[d0 - w.base : a0 - w.base + 1])
        self.is_array = is_array
        return a0

    def _try(self, cur: _Cursor, e: int, nxt: int) -> T | None:
        """:meth:`chunk` from ``cur.s`` to the window offset ``e``; on damage, ``cur.dmg`` is set (and ``cur.s``
        moved to where the damaged stretch starts) and None returned."""
        w = self.w
        try:
            return self.chunk(cur.s - w.base, e, nxt)
        except Damaged as d:
            cur.dmg = self.damaged(cur.s - w.base, d)
            cur.s = cur.dmg.ds
            return None

    def _loose(self, cur: _Cursor, chunk: int) -> Generator[T, None, _End[R] | bool]:
        """A long stretch without a ``}`` boundary (elements that are not objects?): a comma as the chunk end,
        further each time. Yields the chunk taken, if one is; returns the end of the document when the chunk
        read past it, True when the walk goes on from ``cur`` (a chunk taken, or damage), False when nothing
        was settled (``cur.reach`` grown)."""
        w = self.w
        got = loose_boundary(w.buf, cur.s + cur.reach - w.base, w.hi)
        took = self._try(cur, got[0], got[1]) if got is not None else None
        if cur.dmg is not None:
            return True
        if took is not None and got is not None:
            yield took
            cur.took(self._skip(got[1] + w.base), chunk)
            return True
        doc = self._doc_end(cur.s, self.past_end()) if got is not None and self.past_end() >= 0 else None
        if doc is not None:
            return _End(self._finish(cur.s, doc))
        cur.reach = max(2 * cur.reach, got[0] + 1 + w.base - cur.s if got is not None else 0)
        return False

    def _try_end(self, cur: _Cursor) -> _End[R] | None:
        """A long stretch without a boundary: the end of the array, then what follows the document (NUL bytes,
        garbage) would be held to the end of the file. One structure-only parse says (issue 42); NUL bytes where
        the JSON goes on end the data. None: neither (the next try is further)."""
        w = self.w
        at = array_closed_at(w.buf, cur.s - w.base, w.hi)
        doc = self._doc_end(cur.s, at) if at >= 0 else None
        if doc is not None:
            return _End(self._finish(cur.s, doc))
        nul = _nul_tail(w.buf, cur.s - w.base, w.hi)
        cut = self.cut_by_nul(cur.s - w.base, nul) if nul >= 0 else None
        if cut is not None:
            return _End(cut)
        cur.end_try = 2 * (w.base + w.hi - cur.s)
        return None

    def _past_damage(self, cur: _Cursor, chunk: int) -> bool:
        """Read on to the first element start after the damage (``cur`` then resumes there); False when the file
        ends first."""
        w = self.w
        assert cur.dmg is not None
        while True:
            k = self.resync(cur.dmg)
            if k is not None:
                cur.resumed(self._skip(k), chunk)
                return True
            if w.base + w.hi - cur.s > _HOLD_DAMAGE and cur.dmg.pos - 1 > cur.s:
                # A long damaged stretch (every event broken): counted so far, and no longer held.
                self.commit(cur.dmg)
                cur.s = cur.dmg.ds
            if not w.more(cur.s - 1 - w.base):
                return False

    def _skip(self, s: int) -> int:
        """:meth:`skip` from the absolute offset ``s``, reading on (and dropping what was skipped) while the
        filler reaches the end of what has been read; the absolute offset of what follows."""
        w = self.w
        while True:
            i = self.skip(s - w.base)
            s = w.base + i
            if w.hi - i >= _SLACK or not w.more(s - 1 - w.base):
                return s

    def _doc_end(self, s: int, at: int) -> DocEnd | None:
        """Where the document ends (absolute offsets), the array read from the element start ``s`` having closed
        before the window offset ``at``; None when that is not settled by what has been read."""
        w = self.w
        a1 = closed_array(w.buf, s - w.base, at)
        got = document_end(w.buf, a1, w.hi, self.head, self.is_array) if a1 >= 0 else None
        if not isinstance(got, DocEnd):
            return None
        return DocEnd(got.top, got.a1 + w.base, got.end + w.base, got.after + w.base)

    def _finish(self, s: int, doc: DocEnd) -> R:
        """The end of the document is known: the blanks after it are dropped as they are read (a blank tail is
        never held), then :meth:`close`."""
        w = self.w
        after, dropped = doc.after, 0
        while after >= w.base + w.hi:  # only blanks after the document so far: dropped, and the next bytes read
            dropped += w.base + w.hi - doc.end
            w.hi = doc.end - w.base
            if not w.more(s - 1 - w.base):
                after = -1
                break
            after = w.base + skip_space(w.buf, doc.end - w.base, w.hi)
        return self.close(s - w.base, doc, after - w.base if after >= 0 else -1, dropped)

    def _cut_blank_tail(self, s: int, known: int) -> int | None:
        """Drop a long run of whitespace at the end of what has been read, where it is known to sit between
        tokens.

        That is when the bytes from ``s`` (an element start) up to the run are whole elements (the run follows
        an element, or its comma, or the array's ``]``: a structure-only parse says so), or the whole rest of
        the document (one of :func:`~expo_prof.readers.chrome.decode.end_candidates`): such whitespace means
        nothing and would otherwise be held until a boundary or the end of the file comes (a whitespace bomb
        after the events). ``known``: the absolute offset of a byte found so before (nothing is parsed again
        while the run still follows it). Returns the absolute offset of the last byte before the run when it
        was dropped, else None.
        """
        w = self.w
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
                     for _top, a1 in end_candidates(w.buf, t, self.is_array, i0 - 1, self.head) if a1 >= i0)
        if not ok:
            # After the event array's "]" (in a key or value of the top level after it, a string's included): such
            # a run was held whole to the end of the file (issue 34: 256 MB of spaces in "traceName" or between
            # the elements of "deviceProperties" took 1.09 GB). A run of blanks there changes nothing taken.
            ok = _after_the_array(w.buf, i0, x)
        if not ok:
            return None
        w.hi = t + 1  # one blank kept: what follows is read after it
        return w.base + x

    def drain(self) -> None:
        """Inflate the rest of a gzip input without keeping it, so that a bomb is refused at the size cap in one
        window before the careful path (which holds the whole file) starts."""
        w = self.w
        if w.compressed:
            while w.more(w.hi):
                pass


class _End(Generic[R]):
    """The result of the walk's end hooks (a result may itself be None)."""

    __slots__ = ("result",)

    def __init__(self, result: R | None) -> None:
        self.result = result


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

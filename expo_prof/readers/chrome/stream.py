"""Decoding a Chrome-trace file while reading it: the whole file is never in memory.

The document is walked a window at a time by :class:`~expo_prof.readers.chrome.walk.ArrayWalk`
(the walk the export shares: the head, chunks at event boundaries, blanks dropped, the end of the
document); here each chunk of the event array is decoded (:mod:`.decode`) straight from the
:class:`~expo_prof.readers.chrome.window.Window` into columns (:class:`_ColsWalk`). The beginning
of the document up to the array's ``[`` is kept (the top-level keys Kineto writes first:
``deviceProperties``, ``distributedInfo``); once the file is all read, the window holds the last
events and the keys written after the array (``traceName``, ``baseTimeNanoseconds``), and the
array's end is found as in the in-memory path (:func:`~expo_prof.readers.chrome.decode.end_candidates`).

Damaged or unusual input (the array not found in the first 8 MB, JSON that is
cut or broken, gzip data that is cut, corrupt or followed by garbage) returns None: the caller then
reads the whole file and takes the careful path, which repairs what can be
repaired and says what was lost.

What can never count is not held (issue 27, :mod:`.filler`): whitespace before
the document is dropped as it is read, whitespace and runs of ``{}`` at a chunk
start are skipped, a long blank run at the end of what has been read is
dropped once what precedes it is known to be whole elements (the walk), elements that are not objects end
chunks at commas (:func:`~expo_prof.readers.chrome.decode.loose_boundary`), and gzip input
whose array is not found in the first 8 MB is inflated to its end without being
kept before the careful path (:meth:`~expo_prof.readers.chrome.walk.ArrayWalk.drain`): a bomb is refused
at the size cap in one window.
"""

from __future__ import annotations

import gc
from pathlib import Path

from expo_prof.readers.chrome.columns import Cols
from expo_prof.readers.chrome.damage import Damage, before_damage, collect_until_cut
from expo_prof.readers.chrome.decode import (
    Damaged,
    DocEnd,
    Ends,
    NotAnArray,
    Trace,
    decode_chunk,
    end_candidates,
    runs_possible,
    skip_filler,
)
from expo_prof.readers.chrome.document import after_document, collect_array, cut_top
from expo_prof.readers.chrome.walk import NUL_WHY, ArrayWalk
from expo_prof.readers.chrome.window import DamagedGzip, Window
from expo_prof.readers.file_bytes import Progress

__all__ = ["stream_events"]

#: What the reader makes of a document: its top level (None for a bare array), the events as columns and the
#: reading warnings.
Read = tuple[Trace | None, Cols, list[str]]


def stream_events(path: Path, *, max_bytes: int, progress: Progress | None = None) -> Read | None:
    """Top level (None for a bare array), events as columns and reading warnings; None for the careful path."""
    with Window(path, max_bytes=max_bytes, progress=progress) as w:
        # Nothing built here forms reference cycles: collections would only re-walk live objects.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            walk = _ColsWalk(w)
            gen = walk.pieces()
            while True:
                try:
                    next(gen)
                except StopIteration as done:
                    return done.value
        except (NotAnArray, DamagedGzip):
            return None
        finally:
            if gc_was_enabled:
                gc.enable()


class _ColsWalk(ArrayWalk[bool, Read]):
    """The walk that decodes each chunk into :class:`~expo_prof.readers.chrome.columns.Cols`: filler skipped and
    counted, damage skipped and counted (:mod:`.damage`), the last events found as in the in-memory path."""

    def __init__(self, w: Window) -> None:
        super().__init__(w)
        self.c = Cols()

    def chunk(self, i: int, e: int, nxt: int) -> bool | None:
        """:func:`~expo_prof.readers.chrome.decode.decode_chunk` (True: taken)."""
        return True if decode_chunk(self.w.buf, i, e, self.c) else None

    def skip(self, i: int) -> int:
        """Whitespace and runs of ``{}`` (counted as a decoded one is)."""
        return skip_filler(self.w.buf, i, self.w.hi, self.c)

    def runs_possible(self) -> bool:
        return runs_possible(self.c)

    def past_end(self) -> int:
        return self.c.past_end

    def no_array(self) -> Read | None:
        """The careful path (gzip input inflated to its end first: a bomb is refused at the size cap)."""
        self.drain()
        return None

    def damaged(self, i: int, d: Damaged) -> Damage:
        """The whole events before the damage decoded; the damaged stretch starts where they end."""
        w = self.w
        return Damage(before_damage(w.buf, i, d.at, self.c) + w.base, d.at + w.base, d.msg)

    def resync(self, dmg: Damage) -> int | None:
        return dmg.resync(self.w.buf, self.w.hi, self.c, final=False, base=self.w.base)

    def commit(self, dmg: Damage) -> None:
        dmg.commit(self.w.buf, self.c, self.w.base)

    def close(self, i: int, doc: DocEnd, after: int, dropped: int) -> Read:
        """The events from ``i`` to the end of the event array, the document's end being known: whatever follows
        it is not read (a second document of a ``cat a b``, garbage, NUL bytes: one warning naming where it
        starts)."""
        w = self.w
        warnings = list(w.warnings)
        if after >= 0:
            warnings.append(self._after(after, dropped))
        ends = Ends(i - 1, [(doc.top, doc.a1 - w.base)])
        collect_array(w.buf, i - 1, ends, self.c, start=i, base=w.base)
        return ends.top, self.c, warnings

    def at_eof(self, i: int) -> Read:
        """The last events, found as in the in-memory path: the array's ``]`` among
        :func:`~expo_prof.readers.chrome.decode.end_candidates`, damage skipped."""
        w = self.w
        lo = i - 1
        ends = Ends(lo, end_candidates(w.buf, w.hi, self.is_array, lo, self.head), (self.head, w.hi, self.is_array))
        collect_array(w.buf, lo, ends, self.c, start=i, base=w.base)
        warnings = list(w.warnings)
        if ends.after >= 0:
            warnings.append(self._after(ends.after, 0))
        return ends.top, self.c, warnings

    def cut_by_nul(self, i: int, k: int) -> Read | None:
        """The event array cut by NUL bytes from the window offset ``k`` on (the rest of the file is not read):
        the top level from the keys before the array, the events up to the cut, damage skipped (as
        :func:`~expo_prof.readers.chrome.document.read_events` does for a file cut short); None when the keys
        before the array do not make a top level (the careful path)."""
        w = self.w
        top = None
        if not self.is_array:
            top = cut_top(self.head)
            if top is None:
                return None
        kept = w.base + collect_until_cut(w.buf, i, k, self.c)
        rest = "the rest of the file" if w.compressed else f"the last {w.size - kept:,} bytes"
        return top, self.c, [*w.warnings, f"{w.path}: JSON is truncated by NUL bytes from byte {w.base + k:,} "
                                          f"{NUL_WHY}; kept the events before byte {kept:,}, skipped {rest}"]

    def _after(self, i: int, dropped: int) -> str:
        """:func:`~expo_prof.readers.chrome.document.after_document` for the byte ``buf[i]`` of the window
        (``dropped`` blank bytes before it were dropped from the window)."""
        w = self.w
        at = w.base + i + dropped
        return after_document(str(w.path), w.buf[i], at, None if w.compressed else w.size - at, w.compressed)

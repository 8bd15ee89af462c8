"""Bytes of the event array that can never count, skipped at the speed of ``memcmp``: whitespace and empty objects.

A hostile (or broken) Chrome trace can hold hundreds of millions of ``{}``
elements, or gigabytes of whitespace (a gzip bomb compresses them 1000:1).
Decoded like events, each ``{}`` would cost a Struct and a code lookup, and a
run of them without a ``},{"`` boundary would make one chunk of the whole
run; whitespace before the document would be held whole. Here, at a true
element start (where :mod:`.decode` starts a chunk, so the skipping follows the
real structure of the array), such filler is passed over without decoding:

* whitespace by comparing blocks of spaces (``bytearray.startswith``), else one
  scan for the first other byte;
* a run of empty objects by learning its unit (``{}`` + separator, e.g.
  ``{},`` or ``{}, ``) from one regex match and comparing blocks of that unit
  repeated. Each skipped ``{}`` is counted, as a decoded one would be (an event
  without ``ph``: ``ph=?`` in ``dropped_events``).

A unit is only taken when what follows it is visible and is not the array's
``]`` (``{},]`` is left to the decoder, which rejects the trailing comma).
Irregular runs (the separator changing from one element to the next) are left
to the decoder after :data:`_SHORT_ROUNDS` units that did not repeat: decoding
them is then cheaper than matching them one by one.
"""

from __future__ import annotations

import re

__all__ = ["EMPTY_DROPPED", "empty_run_start", "rskip_space", "skip_empties", "skip_space"]

#: The ``dropped_events`` key a skipped ``{}`` is counted under: the one a decoded ``{}`` gets (no ``ph``).
EMPTY_DROPPED = "ph=?"

_WS = b" \t\r\n"
_SPACES = b" " * 4096
_BLOCK = 1 << 16
_NON_SPACE = re.compile(rb"[^ \t\r\n]")
#: One element ``{}`` with the comma after it and the whitespace around.
_EMPTY_UNIT = re.compile(rb"\{[ \t\r\n]*\}[ \t\r\n]*,[ \t\r\n]*")
_RBRACKET = 0x5D
#: Units compared at a time, largest first.
_BLOCKS = (4096, 64, 1)
#: A unit that repeats fewer times than this is a short round; after this many short rounds the rest of the
#: run is left to the decoder.
_MIN_GALLOP = 16
_SHORT_ROUNDS = 8
#: What a run of empty objects looks like as written by compact and by default JSON writers: searched for
#: inside a chunk, so that the chunk ends where such a run begins.
_RUNS = (b"{}," * 16, b"{}, " * 16)


def skip_space(buf: bytearray, p: int, hi: int) -> int:
    """The first offset in ``buf[p:hi]`` that is not JSON whitespace (``hi`` if none)."""
    if p >= hi or buf[p] not in _WS:
        return p
    m = _NON_SPACE.search(buf, p, min(hi, p + 64))  # the usual few blanks of pretty-printed JSON
    if m is not None:
        return m.start()
    while p + len(_SPACES) <= hi and buf.startswith(_SPACES, p):
        p += len(_SPACES)
    # Mixed whitespace: a C pass over a copy of each block (deleting the blanks) beats the regex.
    while hi - p >= _BLOCK and not buf[p : p + _BLOCK].translate(None, _WS):
        p += _BLOCK
    m = _NON_SPACE.search(buf, p, hi)
    return hi if m is None else m.start()


def rskip_space(buf: bytearray, lo: int, hi: int) -> int:
    """One past the last byte of ``buf[lo:hi]`` that is not JSON whitespace (``lo`` if none)."""
    while hi - len(_SPACES) >= lo and buf.endswith(_SPACES, lo, hi):
        hi -= len(_SPACES)
    while hi > lo:
        start = max(lo, hi - _BLOCK)
        piece = bytes(buf[start:hi]).rstrip(_WS)
        if piece:
            return start + len(piece)
        hi = start
    return lo


def skip_empties(buf: bytearray, p: int, hi: int) -> tuple[int, int]:
    """Skip a run of ``{}`` elements (and the whitespace after them) starting at the element start ``p``.

    Returns the offset of the next element (or of whitespace / a cut unit at ``hi``) and the number of
    ``{}`` skipped.
    """
    n = 0
    short = 0
    while short < _SHORT_ROUNDS:
        m = _EMPTY_UNIT.match(buf, p, hi)
        if m is None:
            return p, n
        q = m.end()
        if q >= hi or buf[q] == _RBRACKET:
            return p, n
        unit = bytes(buf[p:q])
        p, n, before = q, n + 1, n
        for k in _BLOCKS:
            block = unit * k if k > 1 else unit
            step = len(block)
            # The byte after the block must be visible and must not close the array.
            while p + step < hi and buf[p + step] != _RBRACKET and buf.startswith(block, p):
                p += step
                n += k
        if n - before < _MIN_GALLOP:
            short += 1
    return p, n


def empty_run_start(buf: bytearray, lo: int, hi: int) -> tuple[int, int] | None:
    """(end of the element before, start) of the first run of empty objects in ``buf[lo:hi]`` written
    compactly or with ``", "``; None if there is none.

    The candidate is only where a chunk may end (``}`` ws ``,`` ws before it); whether it is an event boundary
    is for the decode to say, as for any other candidate.
    """
    best = -1
    for run in _RUNS:
        j = buf.find(run, lo, hi if best < 0 else min(hi, best))
        if j >= 0:
            best = j
    if best < 0:
        return None
    k = best - 1
    while k >= lo and buf[k] in _WS:
        k -= 1
    if k < lo or buf[k] != 0x2C:  # ","
        return None
    k -= 1
    while k >= lo and buf[k] in _WS:
        k -= 1
    if k < lo or buf[k] != 0x7D:  # "}"
        return None
    return k + 1, best

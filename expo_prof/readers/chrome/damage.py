"""Damage inside the event array (issue 34): skip the malformed event, resume at the next one.

A chunk that does not even split into raw slices either ends at a wrong
candidate boundary (inside a string or a nested object) or holds real damage
(``NaN``, a trailing comma, a single-quoted string, a raw control character…).
msgspec tells the two apart by where it stops: the prefix of a chunk that starts
at a true event start is valid JSON up to a wrong end, so a wrong end is only
seen *at* the end (the ``]`` put there) or as "truncated", while damage is seen
before it (:class:`~expo_prof.readers.chrome.decode.Damaged`). Before issue 34 a
damaged chunk was taken for a wrong end: every later candidate was tried from
the same start (quadratic), then the whole file was cut back at the damage,
losing everything after it.

Now, around the damage at ``at``:

* :func:`before_damage` decodes the whole events before it (the chunk from its
  start to one of the last ``}`` before ``at``, the first that decodes);
* :class:`Damage` finds the start of the next event: the first ``{`` after
  ``at`` from which the text parses as whole elements up to a boundary (a ``{``
  inside the damaged event fails that parse within a few bytes), reading more
  when the stream has not got there yet;
* the stretch in between is repaired when a raw control character is all that
  is wrong (replaced by spaces, as the careful path does), else skipped and
  counted as malformed, the first one named with its offset and its first bytes.

Each byte is parsed a bounded number of times, so one bad byte costs about one
chunk's decode, and a file damaged in every event costs a few decodes per event.
"""

from __future__ import annotations

import re
import msgspec

from expo_prof.readers.chrome.columns import Cols
from expo_prof.readers.chrome.decode import (
    CHUNK_BYTES,
    DEC_ARRAY_RAW_EVENTS,
    Damaged,
    collect_raws,
    decode_chunk,
    in_brackets,
    next_boundary,
    skip_filler,
    split_events,
)
from expo_prof.readers.chrome.filler import rskip_space

__all__ = ["Damage", "before_damage", "collect_until_cut", "error_at", "skip_damage"]

#: How many ends are tried for the events before the damage, and for the event a resync candidate starts.
_TRIES = 8
#: A damaged stretch longer than this is only counted (no repair is tried on a copy of it).
_MAX_REGION = 1 << 24
_CTRL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_CTRL_TABLE = bytes(32 if b < 32 else b for b in range(256))
_BYTE_RE = re.compile(r"\s*\(byte (\d+)\)")
_COMMA = 0x2C
_SEP = b" \t\r\n,"


def error_at(buf: bytearray, s: int, e: int) -> tuple[int, str]:
    """Where a structure-only parse of ``buf[s:e]`` (``s`` an element start) as array elements stops: ``(-1, "")``
    when it is whole elements, else the offset of the error in ``buf`` (``e`` when the input is only cut short
    there) and msgspec's message."""
    try:
        in_brackets(buf, s, e, DEC_ARRAY_RAW_EVENTS)
    except msgspec.DecodeError as exc:
        msg = str(exc)
        m = _BYTE_RE.search(msg)
        return (min(s - 1 + int(m.group(1)), e) if m else e), msg
    return -1, ""


def before_damage(buf: bytearray, s: int, at: int, c: Cols) -> int:
    """Decode the whole events of ``buf[s:at]`` (``s`` an event start, ``at`` the damage) into ``c``; the offset
    where they end (``s`` when there are none)."""
    ends: list[int] = []
    j = buf.find(b"}", s, at)
    while j >= 0:
        ends.append(j + 1)
        j = buf.find(b"}", j + 1, at)
    for e in reversed(ends[-_TRIES:]):
        try:
            if decode_chunk(buf, s, e, c):
                return e
        except Damaged:
            continue
    return s


class Damage:
    """A damaged stretch of the event array from ``ds`` (where the whole events before it end) with its first
    damage at ``at``; offsets are absolute (a window's buffer starts at ``base``)."""

    def __init__(self, ds: int, at: int, msg: str) -> None:
        self.ds, self.at, self.msg = ds, at, msg
        #: Where the next resync candidate is looked for; candidates passed that follow a comma (likely event
        #: starts that did not parse) count as events skipped.
        self.pos = at
        self.passed = 0
        #: The stretch from ``ds`` was counted already (:meth:`commit`): its start is no longer one more event.
        self.continued = False
        self.lead_comma = False

    def resync(self, buf: bytearray, hi: int, c: Cols, *, final: bool, base: int = 0) -> int | None:
        """The absolute offset of the first event start after the damage that parses (the stretch before it
        repaired or skipped into ``c``), or the absolute ``hi`` when ``final`` and there is none (the rest is
        skipped). None: not decided in ``buf[:hi]``, read more (``ds`` must stay in the buffer)."""
        while True:
            k = buf.find(b"{", self.pos - base, hi)
            if k < 0:
                if not final:
                    self.pos = max(self.pos, base + hi)
                    return None
                self._skip(buf, hi, c, base)
                return base + hi
            ok = _starts_events(buf, k, hi, final)
            if ok is None:
                self.pos = base + k
                return None
            if ok:
                self._skip(buf, k, c, base)
                return base + k
            if self.lead_comma if base + k == self.ds and self.continued else _after_comma(buf, self.ds - base, k):
                self.passed += 1
            self.pos = base + k + 1

    def commit(self, buf: bytearray, c: Cols, base: int = 0) -> None:
        """Count the stretch up to where the next event start is looked for as skipped, and go on from there, so
        that a reader holding the stretch can drop it (a file damaged in every event is one long stretch)."""
        self._skip(buf, self.pos - base, c, base)
        # Whether the candidate the stretch now starts at follows a comma: the bytes before it are dropped.
        self.lead_comma = _after_comma(buf, self.ds - base, self.pos - base)
        self.ds, self.passed, self.continued = self.pos, 0, True

    def _skip(self, buf: bytearray, k: int, c: Cols, base: int) -> None:
        """Repair or count the damaged stretch ``buf[ds:k]`` (``k`` relative to ``buf``)."""
        ds = self.ds - base
        region = bytes(buf[ds:k]).strip(_SEP) if k - ds <= _MAX_REGION else b""
        if self.continued:
            c.n_malformed += self.passed
            return
        if region and "invalid character" in self.msg and _CTRL.search(region):
            fixed = region.translate(_CTRL_TABLE)
            raws = split_events(b"[" + fixed + b"]")
            if raws:
                c.repairs["ctrl"] = c.repairs.get("ctrl", 0) + len(_CTRL.findall(region))
                collect_raws(raws, c)
                return
        c.n_malformed += 1 + self.passed
        if c.first_malformed is None:
            what = _BYTE_RE.sub("", self.msg).removeprefix("JSON is malformed: ")
            head = bytes(buf[ds:k]).strip(_SEP)[:60].decode("utf-8", "replace")
            c.first_malformed = f"{what} at byte {self.at:,}, in {head!r}…"


def _after_comma(buf: bytearray, lo: int, k: int) -> bool:
    """Whether the last byte of ``buf[lo:k]`` that is not blank is a comma (``k`` likely an element start)."""
    near = bytes(buf[max(lo, k - 64) : k]).rstrip(b" \t\r\n")  # the usual: a few blanks (rskip_space copies 64 KB)
    if near or k - 64 <= lo:
        return near[-1:] == b","
    j = rskip_space(buf, lo, k)
    return j > lo and buf[j - 1] == _COMMA


def _starts_events(buf: bytearray, k: int, hi: int, final: bool) -> bool | None:
    """Whether whole elements start at ``buf[k]`` (a ``{``): the text parses up to one of the next boundaries.
    None: the buffer ends before that is known (and not ``final``)."""
    pos = k + 1
    for _ in range(_TRIES):
        e, _nxt = next_boundary(buf, pos, hi)
        if e >= hi:
            if not final:
                return None
            e = hi  # the array's "]"
        err, _msg = error_at(buf, k, e)
        if err < 0:
            return True
        if err < e or e >= hi:
            return False
        pos = e
    return False


def skip_damage(buf: bytearray, s: int, d: Damaged, a1: int, c: Cols, base: int = 0) -> int:
    """In a buffer holding the array up to its ``]`` at ``a1`` (``buf[0]`` at offset ``base`` of the file):
    decode the events before the damage ``d`` found in the chunk starting at ``s``, skip the damaged stretch;
    where decoding goes on (relative to ``buf``)."""
    ds = before_damage(buf, s, d.at, c)
    got = Damage(base + ds, base + d.at, d.msg).resync(buf, a1, c, final=True, base=base)
    assert got is not None  # final: never undecided
    return got - base


def collect_until_cut(buf: bytearray, s: int, hi: int, c: Cols) -> int:
    """Decode the events of an event array that the end of the file cuts short at ``hi`` (no ``]``), from the
    event start ``s``, damage skipped as anywhere else; the offset where the last whole event ends.

    A file both cut and damaged before the cut kept only the events before the damage (the careful path cuts a
    document back at its first error, issue 34): here reading resumes after the damage and goes on to the cut.
    """
    step = CHUNK_BYTES
    while True:
        s = skip_filler(buf, s, hi, c)
        if s >= hi:
            return hi
        e, nxt = next_boundary(buf, s + step, hi)
        while e < hi:
            try:
                if decode_chunk(buf, s, e, c):
                    break
            except Damaged as d:
                ds = before_damage(buf, s, d.at, c)
                dmg = Damage(ds, d.at, d.msg)
                k = dmg.resync(buf, hi, c, final=False)  # (not final: the cut is no "]" to parse up to)
                if k is None:  # no whole event between the damage and the cut
                    dmg._skip(buf, hi, c, 0)
                    return ds
                e, nxt = -1, k
                break
            e, nxt = next_boundary(buf, e + 1, hi)
        if e < hi:
            s = nxt
        elif step > 1:
            step = 1  # no boundary before the cut: the last chunk event by event, up to the one the cut is in
        else:
            return _last_element(buf, s, hi, c)


def _last_element(buf: bytearray, s: int, hi: int, c: Cols) -> int:
    """The element from ``s`` to the cut at ``hi``: collected when the file was cut right after it (``}``,
    ``},`` or ``},{`` at the end); where the kept events end."""
    end = rskip_space(buf, s, hi)
    if end > s and buf[end - 1] == 0x7B:
        end = rskip_space(buf, s, end - 1)
    if end > s and buf[end - 1] == _COMMA:
        end = rskip_space(buf, s, end - 1)
    if end > s and buf[end - 1] == 0x7D:
        piece = bytearray(b"[") + buf[s:end] + b"]"  # (at the end of the buffer: no room for the brackets there)
        try:
            if decode_chunk(piece, 1, len(piece) - 1, c):
                return end
        except Damaged:
            pass
    return s

"""Reading a trace file into memory: gzip, size cap, progress, JSON repair.

Every reader gets its bytes from :func:`read_bytes`, which

* decompresses gzip (detected by magic bytes, not by the file name) into one
  preallocated buffer, so the peak stays at one copy of the decompressed
  bytes;
* refuses to go past ``max_bytes`` decompressed (a gzip bomb, or a trace too
  large for this machine) with a one-line :class:`~expo_prof.errors.BadInput`;
* keeps what a truncated gzip stream yielded and says so in a warning.

:func:`decode_json` runs a msgspec decoder and, when the document is
malformed, repairs what can be repaired (invalid UTF-8, raw control
characters, a truncated tail) and reports how much was lost.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from expo_prof.errors import BadInput

#: Default cap on the decompressed size of one trace file (bytes).
DEFAULT_MAX_DECOMPRESSED = 4 << 30

try:  # ISA-L inflates gzip about twice as fast as zlib; same API
    from isal import isal_zlib as _inflate

    # isal's stub declares `error: Exception` (an instance); it is the exception class, as zlib's.
    _INFLATE_ERRORS: tuple[type[Exception], ...] = (_inflate.error, zlib.error)  # type: ignore[assignment]
except ImportError:  # pragma: no cover - isal is a dependency, but zlib does the same job
    _inflate = zlib  # type: ignore[misc]
    _INFLATE_ERRORS = (zlib.error,)

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20

Progress = Callable[[int], None]  # called with the number of new on-disk bytes consumed


def _mb(n: int) -> str:
    """A size in the unit that shows it (``10.2 kB``, never ``0.0 MB``)."""
    if n < 10**3:
        return f"{n} bytes"
    if n < 10**6:
        return f"{n / 1e3:.1f} kB"
    return f"{n / 1e6:.1f} MB" if n < 10**9 else f"{n / 1e9:.2f} GB"


@dataclass
class Loaded:
    """Bytes of one file plus what went wrong while reading them.

    A reader that takes a Loaded may set ``data`` to None once it no longer
    needs the bytes, so that they are freed before the columns are built.
    """

    data: bytes | bytearray | None
    warnings: list[str] = field(default_factory=list)
    compressed: bool = False

    def take(self) -> bytes | bytearray:
        """The bytes, handed over: ``data`` is None afterwards, so they are freed with the caller's reference."""
        data = self.data
        if data is None:
            raise ValueError("the bytes of this file were already taken")
        self.data = None
        return data


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def read_bytes(path: Path, *, max_bytes: int = DEFAULT_MAX_DECOMPRESSED, progress: Progress | None = None) -> Loaded:
    """Read ``path`` (plain or gzip) fully, capped at ``max_bytes`` decompressed."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(2)
            f.seek(0)
            if head == _GZIP_MAGIC:
                return _read_gzip(path, f, size, max_bytes, progress)
            if size > max_bytes:
                raise BadInput(
                    f"{path}: {_mb(size)} is over the {_mb(max_bytes)} size cap (raise it with --max-bytes)"
                )
            # readinto a preallocated buffer: f.read() would briefly hold two copies.
            data = bytearray(size)
            got = f.readinto(data)
            if got is not None and got < size:
                del data[got:]
            if progress:
                progress(size)
            return Loaded(data)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_pieces(
    path: Path, *, max_bytes: int = DEFAULT_MAX_DECOMPRESSED, progress: Progress | None = None,
    warnings: list[str] | None = None, piece: int = _CHUNK,
) -> Iterator[bytes]:
    """The bytes of ``path`` (plain or gzip) in pieces of at most ``piece`` bytes, capped at ``max_bytes``
    decompressed: what :func:`read_bytes` reads, without holding it whole. The reading's warnings (a truncated or
    corrupt gzip stream, garbage after it) go to ``warnings``."""
    warnings = [] if warnings is None else warnings
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if f.read(2) == _GZIP_MAGIC:
                f.seek(0)
                yield from inflate(path, f, max_bytes, progress, warnings, piece)
                return
            f.seek(0)
            if size > max_bytes:
                raise BadInput(
                    f"{path}: {_mb(size)} is over the {_mb(max_bytes)} size cap (raise it with --max-bytes)"
                )
            while True:
                data = f.read(piece)
                if not data:
                    return
                if progress:
                    progress(len(data))
                yield data
    except OSError as exc:
        raise BadInput(f"{path}: cannot read ({exc.strerror or exc})") from None


def gzip_size_hint(f: Any, size: int, max_bytes: int) -> int:
    """The uncompressed size a gzip file's trailer states, or 0 when it is implausible.

    The trailer holds the size modulo 2**32: right for the usual single-member
    file below 4 GiB; a truncated file has no trailer at all.
    """
    if size < 18:
        return 0
    pos = f.tell()
    f.seek(size - 4)
    (hint,) = struct.unpack("<I", f.read(4))
    f.seek(pos)
    return hint if 0 < hint <= min(max_bytes, size * 100) else 0


class Sink:
    """The buffer decompressed bytes go to; grows as needed."""

    def __init__(self, capacity: int) -> None:
        self.buf = bytearray(capacity)
        self.used = 0

    def put(self, chunk: bytes) -> None:
        end = self.used + len(chunk)
        if end > len(self.buf):
            self.buf.extend(b"\0" * (end - len(self.buf)))
        self.buf[self.used : end] = chunk
        self.used = end


def _read_gzip(path: Path, f: Any, size: int, max_bytes: int, progress: Progress | None) -> Loaded:
    sink = Sink(gzip_size_hint(f, size, max_bytes))
    warnings: list[str] = []
    for piece in inflate(path, f, max_bytes, progress, warnings):
        sink.put(piece)
    buf = sink.buf
    del buf[sink.used :]
    return Loaded(buf, warnings, compressed=True)


def inflate(
    path: Path, f: Any, max_bytes: int, progress: Progress | None, warnings: list[str], piece: int = _CHUNK,
    damage: list[str] | None = None,
) -> Iterator[bytes]:
    """The decompressed bytes of the gzip file ``f``, in pieces of at most ``piece`` bytes.

    Truncated or corrupt data ends the pieces with a warning appended to
    ``warnings`` (what came before is kept); more than ``max_bytes`` raises
    :class:`BadInput` (a gzip bomb). ``progress`` gets the compressed bytes
    consumed. Concatenated members are read on; zero padding after a member ends the reading (the rest is not
    read); any other bytes after a member are not gzip data: they end the reading with a warning naming their
    offset in the file. ``damage``, when given, gets the kind of each warning: ``"truncated"``, ``"corrupt"``
    or ``"trailing"``.
    """
    d = _inflate.decompressobj(wbits=31)
    used = 0
    read = 0  # compressed bytes read from f
    truncated = corrupt = False
    done = False
    carry = b""
    while not done:
        comp = f.read(_CHUNK)
        if progress and comp:
            progress(len(comp))
        read += len(comp)
        if carry:
            if not comp:
                break  # the end of the file: the byte kept is reported below
            comp, carry = carry + comp, b""
        if not comp:
            if not d.eof:
                tail = d.flush()
                used += len(tail)
                truncated = True
                if used > max_bytes:
                    raise BadInput(f"{path}: decompresses to more than {_mb(max_bytes)} (size cap; raise it with --max-bytes)")
                if tail:
                    yield tail
            break
        more = True
        while comp or more:
            if d.eof:
                if not comp:
                    break
                if comp == _GZIP_MAGIC[:1]:
                    carry = comp  # the magic may straddle two reads: decided with the next one
                    break
                # Concatenated gzip members are legal; zero padding after the stream is ignored (and not read).
                if comp[:2] != _GZIP_MAGIC:
                    done = True
                    if comp[0] != 0:
                        at = read - len(comp)
                        warnings.append(_trailing_gzip(path, f, at))
                        if damage is not None:
                            damage.append("trailing")
                    break
                d = _inflate.decompressobj(wbits=31)
            try:
                # Small output pieces: the only copy that grows is the caller's.
                limit = max(1, min(piece, max_bytes + 1 - used))
                out = d.decompress(comp, limit)
            except _INFLATE_ERRORS as exc:
                warnings.append(
                    f"{path}: gzip data is corrupt ({exc}); kept the {_mb(used)} decompressed before it"
                )
                if damage is not None:
                    damage.append("corrupt")
                corrupt = done = True
                break
            used += len(out)
            if used > max_bytes:
                raise BadInput(
                    f"{path}: decompresses to more than {_mb(max_bytes)} (size cap: a gzip bomb or a "
                    "trace too large; raise it with --max-bytes)"
                )
            if out:
                yield out
            comp = d.unused_data if d.eof else d.unconsumed_tail
            # A full output piece may leave output pending inside zlib: ask again.
            more = len(out) == limit and not d.eof
    if carry and d.eof:  # one byte after the last member, at the end of the file
        warnings.append(_trailing_gzip(path, f, read - len(carry)))
        if damage is not None:
            damage.append("trailing")
    if used == 0 and truncated and not corrupt:
        raise BadInput(f"{path}: gzip stream is truncated before any data")
    if truncated and not corrupt:
        warnings.append(f"{path}: gzip stream is truncated; read the first {_mb(used)} decompressed")
        if damage is not None:
            damage.append("truncated")


def _trailing_gzip(path: Path, f: Any, at: int) -> str:
    """The warning for bytes after the end of the gzip data, from the file's byte ``at`` on (not read)."""
    try:
        size: int | None = os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        size = None
    n = f" ({size - at:,} bytes)" if size is not None and size > at else ""
    return (f"{path}: trailing data after the end of the gzip stream, from byte {at:,} of the file{n}, is not "
            "gzip data; ignored")


# --------------------------------------------------------------------------- JSON repair

_CTRL_TABLE = bytes(32 if b < 32 else b for b in range(256))
_CTRL_BYTES = [bytes([b]) for b in range(32) if b not in b"\t\n\r"]


@dataclass
class Decoded:
    value: Any
    warnings: list[str]
    #: The bytes the value's ``msgspec.Raw`` slices point into (the input, a repaired copy, or a cut-back
    #: copy with room for the closing brackets); None: the input.
    buffer: bytes | bytearray | None = None


def decode_json(
    data: bytes | bytearray,
    decoder: msgspec.json.Decoder,
    where: str,
    *,
    container: str = "auto",
) -> Decoded:
    """Decode ``data`` with ``decoder``, repairing common damage.

    Repairs, each reported in one warning line: invalid UTF-8 (replaced by
    U+FFFD, count given), raw control characters inside strings (replaced by
    spaces), a truncated document (cut back to the last complete element of
    the event array and closed). ``container`` is ``"object"`` (a
    ``{"traceEvents": [...]}`` document), ``"array"`` (a bare array) or
    ``"auto"``. Raises :class:`BadInput` when nothing can be recovered.
    """
    warnings: list[str] = []
    buf = data
    for _attempt in range(4):
        try:
            return Decoded(decoder.decode(buf), warnings, None if buf is data else buf)
        except msgspec.ValidationError:
            raise
        except msgspec.DecodeError as exc:
            msg = str(exc)
            fixed = repair(buf, msg)
            if fixed is not None:
                buf, what, count = fixed
                warnings.append(f"{where}: {repair_message(what, count)}")
                continue
            pos = _error_pos(msg, len(buf))
            salvaged = _salvage_prefix(buf, decoder, pos, container)
            if salvaged is not None:
                value, kept, used = salvaged
                lost = len(buf) - kept
                warnings.append(
                    f"{where}: JSON is {'truncated' if 'truncated' in msg else 'malformed'} "
                    f"({msg.removeprefix('JSON is malformed: ')}); kept the events before byte {kept:,}, "
                    f"skipped the last {lost:,} bytes"
                )
                return Decoded(value, warnings, None if used is data else used)
            raise BadInput(f"{where}: not valid JSON ({msg})") from None
    raise BadInput(f"{where}: not valid JSON (repair failed)")


def repair(buf: bytes | bytearray, msg: str) -> tuple[bytes, str, int] | None:
    """Fix what a msgspec DecodeError ``msg`` complains about, if it is repairable.

    Returns ``(fixed_bytes, what, count)`` with ``what`` "utf8" (invalid UTF-8
    replaced by U+FFFD) or "ctrl" (raw control characters replaced by spaces),
    or None when the damage is of another kind.
    """
    if "UTF-8" in msg or "utf-8" in msg:
        raw = bytes(buf)
        before = raw.count(_FFFD)
        fixed = raw.decode("utf-8", errors="replace").encode("utf-8")
        return fixed, "utf8", fixed.count(_FFFD) - before
    if "invalid character" in msg:
        # Counted a byte value at a time: a list of the matches took 8 bytes per control character (1.9 GB for a
        # file of 200 MB of NUL bytes, issue 42).
        n_ctrl = sum(buf.count(c) for c in _CTRL_BYTES)
        fixed = bytes(buf).translate(_CTRL_TABLE)
        if fixed != buf:
            # Outside strings, tabs/newlines become spaces: still whitespace, so harmless.
            return fixed, "ctrl", n_ctrl
    return None


def repair_message(what: str, count: int) -> str:
    if what == "utf8":
        return f"{count} invalid UTF-8 byte sequence(s) in strings replaced by U+FFFD"
    if count:
        return f"{count} raw control character(s) inside strings replaced by spaces"
    return "raw tabs/newlines inside strings replaced by spaces"


_FFFD = "\ufffd".encode()
_BYTE_RE = re.compile(r"\(byte (\d+)\)")


def _error_pos(msg: str, n: int) -> int:
    m = _BYTE_RE.search(msg)
    return min(int(m.group(1)), n) if m else n


def _salvage_prefix(
    buf: bytes | bytearray, decoder: msgspec.json.Decoder, pos: int, container: str
) -> tuple[Any, int, bytes | bytearray] | None:
    """Cut ``buf`` back to a complete array element before ``pos`` and close the document: (value, bytes
    kept, the buffer the value points into).

    A bytearray is decoded in place (the closing brackets written after the cut for the time of one decode,
    then put back): no copy of a document that may be gigabytes. The value may then hold slices of ``buf``
    whose last bytes are the ones put back (the event array's ``]`` is read as the end of the last chunk).
    Without room after the cut (the file ends with a complete element), the kept part is copied once, with
    the brackets.
    """
    first = _NON_BLANK.search(buf, 0, pos)
    if container == "auto":
        container = "array" if first is not None and first.group() == b"[" else "object"
    is_array = first is not None and first.group() == b"["
    del first  # a match holds on to the buffer it searched
    closer = b"]" if container == "array" else b"]}"
    # Candidate cut points, last first: the end of the text when it ends in
    # "}" (a file cut right after an element keeps that element), then every
    # end of an element ("}" followed by ","). A "}" that closes a nested
    # object instead fails to decode and the next candidate is tried.
    end = _rstrip_end(buf, pos)
    cut = end - 1 if end and buf[end - 1] == 0x7D else buf.rfind(b"},", 0, end)
    for _ in range(64):
        if cut < 0:
            break
        try:
            value, used = _decode_closed(buf, decoder, cut + 1, closer)
            return value, cut + 1, used
        except (msgspec.DecodeError, msgspec.ValidationError):
            cut = buf.rfind(b"},", 0, cut)
    # Nothing complete: an empty event list still tells the caller "recognised but empty".
    if container == "array" and is_array:
        try:
            return decoder.decode(b"[]"), 0, b"[]"
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
    return None


_NON_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")


def _rstrip_end(buf: bytes | bytearray, pos: int) -> int:
    """``len(buf[:pos].rstrip())``, a block at a time (no copy of the whole)."""
    while pos > 0:
        lo = max(0, pos - (1 << 16))
        kept = len(bytes(buf[lo:pos]).rstrip())
        if kept:
            return lo + kept
        pos = lo
    return 0


def _decode_closed(
    buf: bytes | bytearray, decoder: msgspec.json.Decoder, end: int, closer: bytes
) -> tuple[Any, bytes | bytearray]:
    """``decoder.decode(buf[:end] + closer)`` and the buffer decoded: ``buf`` itself (in place) when it is a
    bytearray with room after ``end``, else one copy."""
    n = len(closer)
    if not isinstance(buf, bytearray) or end + n > len(buf):
        closed = bytearray(end + n)
        closed[:end] = memoryview(buf)[:end]
        closed[end:] = closer
        return decoder.decode(closed), closed
    saved = bytes(buf[end : end + n])
    buf[end : end + n] = closer
    try:
        return decoder.decode(memoryview(buf)[: end + n]), buf
    finally:
        buf[end : end + n] = saved


def file_size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


#: Decompressed bytes per byte on disk assumed for a gzip file whose trailer cannot say (below): the real
#: traces under ../shared/realtraces inflate 10 to 30 times (the large Kineto and vLLM ones 13 to 20).
GZIP_RATIO = 15


def work_size(path: Path) -> int:
    """The bytes a reader will parse in ``path``: its decompressed size, without decompressing it.

    A plain file: its size. A gzip file (by its magic bytes): the size its trailer states (ISIZE, the last
    4 bytes: the decompressed length modulo 2**32, exact for the usual one-member file under 4 GiB), or,
    where that is below the size on disk and so cannot be the file's (a file of 4 GiB or more, several
    members, a cut-off file), :data:`GZIP_RATIO` times the size on disk. What cannot be opened (a folder): its
    size on disk (0 when missing).
    What it is for: deciding whether starting worker processes pays (``--jobs``), which depends on the work
    a file holds, not on its bytes on disk (a gzipped trace holds 10 to 30 times as much JSON)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 18 or f.read(2) != _GZIP_MAGIC:  # 18: a gzip header and trailer, nothing less
                return size
            f.seek(size - 4)
            (isize,) = struct.unpack("<I", f.read(4))
    except OSError:
        return file_size(path)
    return isize if isize >= size else size * GZIP_RATIO

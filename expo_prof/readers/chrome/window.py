"""A file's (decompressed) bytes a window at a time, in one reused buffer.

The Chrome-trace reader decodes its input chunk by chunk, so it never needs
the whole file in memory: :class:`Window` holds the bytes not decoded yet in
one bytearray (1 MB) that is refilled from the front. Besides the memory, this
saves time: every page of a fresh buffer costs a page fault on first touch
(≈0.6 µs each here, ≈2 ms per 4 MB), while the window's pages are touched once,
reused, and stay in the CPU's cache while the decoder reads them.

gzip input is inflated straight into the window by ISA-L's C reader
(``isal_zlib._GzipReader.readinto``): no intermediate piece is allocated or
copied. Damaged gzip data (truncated, corrupt, garbage after the stream) makes
that reader raise, with the same message for all three (and without the last
bytes it inflated). The window then inflates the file again with the careful
inflater (:func:`~expo_prof.readers.file_bytes.inflate`), passing over what it
delivered already, to tell them apart (issue 42): garbage after a complete
stream is ignored with a warning naming its offset, and the window goes on;
for a cut or corrupt stream :meth:`Window.more` raises :class:`DamagedGzip`
once it has delivered what is readable, and the caller reads the file the
careful way (:func:`~expo_prof.readers.file_bytes.read_bytes`), which keeps
what is readable and says what was lost.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from expo_prof.errors import BadInput
from expo_prof.readers.file_bytes import _GZIP_MAGIC, Progress, _mb, gzip_size_hint, inflate

try:
    from isal.isal_zlib import _GzipReader
except ImportError:  # pragma: no cover - isal is a dependency; inflate() does the same job
    _GzipReader = None  # type: ignore[misc,assignment]

__all__ = ["DamagedGzip", "Window"]

#: Starting capacity of the window (two chunks of the decoder and a piece fit); it doubles when one
#: event does not fit.
CAPACITY = 1 << 20
#: Bytes read (or inflated) at a time.
PIECE = 1 << 18
#: Compressed bytes read at a time by the gzip reader.
_COMPRESSED_READ = 1 << 17


class DamagedGzip(Exception):
    """The gzip data is truncated, corrupt or followed by something else: read the file the careful way."""


class _Counted:
    """A file whose ``readinto`` reports the bytes read to a progress callback."""

    __slots__ = ("_f", "_progress")

    def __init__(self, f: Any, progress: Progress) -> None:
        self._f = f
        self._progress = progress

    def readinto(self, b: Any) -> int:
        n = self._f.readinto(b)
        if n:
            self._progress(n)
        return n

    # ISA-L's reader takes an object with ``read`` for a file (it then calls ``readinto``); without it, for
    # a buffer.
    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        if data:
            self._progress(len(data))
        return data


class Window:
    """Bytes ``buf[:hi]`` of a file; ``buf[0]`` is at offset :attr:`base` of the (decompressed) file."""

    def __init__(self, path: Path, *, max_bytes: int, progress: Progress | None = None,
                 capacity: int | None = None) -> None:
        self.path = path
        capacity = capacity or CAPACITY
        self.hi = 0
        self.base = 0
        self.eof = False
        #: Warnings of the reading itself (a truncated or corrupt gzip stream).
        self.warnings: list[str] = []
        try:
            size = path.stat().st_size
            #: The size of the file on disk.
            self.size = size
            self._f = open(path, "rb")
        except OSError as exc:
            raise BadInput(f"{path}: cannot read ({exc.strerror or exc})") from None
        self.compressed = self._f.read(2) == _GZIP_MAGIC
        self._f.seek(0)
        self._pieces: Iterator[bytes] | None = None
        self._gz: Any = None
        self._max_bytes = max_bytes
        #: Decompressed bytes delivered so far (gzip input).
        self._inflated = 0
        self._progress = progress
        if self.compressed:
            expected = gzip_size_hint(self._f, size, max_bytes) or capacity
            if _GzipReader is not None:
                src: Any = self._f if progress is None else _Counted(self._f, progress)  # read by duck typing
                self._gz = _GzipReader(src, _COMPRESSED_READ)
            else:  # pragma: no cover
                self._pieces = inflate(path, self._f, max_bytes, progress, self.warnings, PIECE)
        elif size > max_bytes:
            self.close()
            raise BadInput(f"{path}: {_mb(size)} is over the {_mb(max_bytes)} size cap (raise it with --max-bytes)")
        else:
            expected = size
        # A small file gets a window of its own size (memory, and page faults on first touch).
        self.buf = bytearray(max(min(capacity, expected + 1), 1 << 12))

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> Window:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def more(self, keep_from: int) -> bool:
        """Read the next piece; bytes before ``keep_from`` may be dropped to make room. False at the end.

        Offsets into :attr:`buf` change when bytes are dropped: callers keep
        absolute offsets (``base + i``). The buffer must have no exports (no
        live memoryview) when this is called.
        """
        if self.eof:
            return False
        room = min(PIECE, len(self.buf))
        if self.hi + room > len(self.buf):
            self._make_room(keep_from, room)
        try:
            if self._gz is not None:
                n = self._inflate_into(room)
            elif self._pieces is None:
                view = memoryview(self.buf)
                try:
                    n = self._f.readinto(view[self.hi : self.hi + room])
                finally:
                    view.release()
                if self._progress and n:
                    self._progress(n)
            else:
                n = self._next_piece()
        except OSError as exc:
            raise BadInput(f"{self.path}: cannot read ({exc.strerror or exc})") from None
        if not n:
            self.eof = True
            return False
        self.hi += n
        return True

    def _inflate_into(self, room: int) -> int:
        # One byte past the cap is asked for, so that going over it is seen.
        room = max(1, min(room, self._max_bytes + 1 - self._inflated))
        view = memoryview(self.buf)
        try:
            n = self._gz.readinto(view[self.hi : self.hi + room])
        except Exception as exc:  # noqa: BLE001 - isal raises EOFError, OSError or its own error on damaged data
            view.release()
            # The same message for a cut stream and for garbage after a complete one: the careful inflater tells.
            self._gz = None
            self._pieces = self._resume(str(exc))
            return self._next_piece()
        finally:
            view.release()
        self._inflated += n
        if self._inflated > self._max_bytes:
            raise BadInput(
                f"{self.path}: decompresses to more than {_mb(self._max_bytes)} (size cap: a gzip bomb or a "
                "trace too large; raise it with --max-bytes)"
            )
        return n

    def _next_piece(self) -> int:
        assert self._pieces is not None
        piece = next(self._pieces, b"")
        n = len(piece)
        self.buf[self.hi : self.hi + n] = piece
        return n

    def _resume(self, why: str) -> Iterator[bytes]:
        """The bytes after the :attr:`_inflated` delivered so far, inflated again from the start of the file by
        :func:`~expo_prof.readers.file_bytes.inflate`; garbage after the stream adds its warning, a cut or
        corrupt stream raises :class:`DamagedGzip` after its readable bytes."""
        warnings: list[str] = []
        damage: list[str] = []
        skip = self._inflated
        with open(self.path, "rb") as f:
            for piece in inflate(self.path, f, self._max_bytes, None, warnings, PIECE, damage):
                if skip >= len(piece):
                    skip -= len(piece)
                    continue
                if skip:
                    piece, skip = piece[skip:], 0
                self._inflated += len(piece)
                yield piece
        if "truncated" in damage or "corrupt" in damage:
            raise DamagedGzip(why)
        self.warnings.extend(warnings)

    def _make_room(self, keep_from: int, room: int) -> None:
        k = max(0, min(keep_from, self.hi))
        if k:
            self.buf[: self.hi - k] = self.buf[k : self.hi]
            self.base += k
            self.hi -= k
        if self.hi + room > len(self.buf):  # more kept than the window holds (one huge event): grow it
            self.buf.extend(bytes(len(self.buf)))

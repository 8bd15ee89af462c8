"""Writing what a command produces: never over an input, never over a file this tool did not write.

One guard for every output option (``-o`` of the pages and the export,
``--json`` of analyze and compare, ``--html`` of compare): the output must have
the suffix of what is written (pages ``.html``/``.htm``, exports
``.json``/``.json.gz``; JSON results any name), must not be an input or a
directory, and an existing file is only replaced when its first bytes show it
is expo-prof output of the same kind (a page's generator tag, an export's
header, a result's ``schema_name``) — a README or a trace is never overwritten.
``-`` means stdout. Run directories have their own guard
(:func:`expo_prof.runs.layout.claim_out_dir`).

How a file is written (:func:`write`, :func:`write_chunks`), so that a failure
never leaves half an output under its name:

* **A file** is written to a new temporary file beside it,
  ``.NAME.PID.RANDOM.tmp`` (created exclusively, ``O_EXCL``: two processes, even
  two containers whose processes have the same pid, never share one), then
  renamed over the name (``os.replace``, atomic). A full disk (``ENOSPC``), any
  other write error, Ctrl-C or any exception before the rename removes the
  temporary file: the name holds its earlier output, untouched, or nothing.
  Two commands writing the same name at once each rename a complete file; the
  last rename wins, the name never holds a mix. No fsync before the rename:
  see :func:`write_chunks`.
* **A stream** — a character device (``/dev/null``, ``/dev/full``, a
  terminal), a named pipe, or an open descriptor of this process
  (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``, e.g. a shell's
  ``>(gzip > x.gz)``) — is written into directly: there is no file to replace
  and no name to mark the kind, so neither the suffix rule nor the overwrite
  check applies. ``-`` and ``/dev/stdout`` write to this process's stdout (the
  command's summary line then goes to stderr: :func:`is_stdout`).
* **Other special files** (a block device, a socket) are refused, one line.

A write that fails (a full disk, ``/dev/full``, a read-only folder) is one line,
``error: -o PATH: cannot write (No space left on device)``, exit 2 like any
output that cannot be used (expo_prof/errors.py); Ctrl-C is exit 130
(expo_prof/cli/main.py).
"""

from __future__ import annotations

import gzip
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from expo_prof.errors import BadInput, signals_held


@dataclass(frozen=True)
class Kind:
    """What a command writes: allowed suffixes (empty: any) and how its own files begin."""

    what: str
    suffixes: tuple[str, ...]
    prefix: bytes
    mark: bytes
    #: How the refusal names an earlier file of this kind.
    own: str = "expo-prof output"


PAGE = Kind("an HTML page", (".html", ".htm"), b"<!DOCTYPE html>", b'<meta name="generator" content="expo-prof')
EXPORT = Kind("a Chrome-trace JSON", (".json", ".json.gz"), b'{"schemaVersion":1,"displayTimeUnit":"ns"', b'"tool":"expo-prof')
#: ``export --format perfetto``: a Perfetto protobuf trace. Its first packet is a track descriptor named
#: ``expo-prof …`` (the bytes 0x0a = field 1 of Trace, length-delimited), which marks the file as ours.
PERFETTO = Kind("a Perfetto protobuf trace", (".pftrace", ".perfetto-trace", ".pb", ".pftrace.gz"), b"\x0a",
                b"expo-prof export")
ANALYZE_JSON = Kind("an analyze result", (), b"{", b'"schema_name": "expo-prof.analyze"', "an earlier analyze output")
TEXT = Kind("text tables", (".txt", ".log", ".md", ".text"), b"", b" hidden, exposed ", "an earlier analyze output")
COMPARE_JSON = Kind("a compare result", (), b"{", b"expo-prof.compare", "an earlier compare output")
COMPARE_TEXT = Kind("compare tables", (".txt", ".log", ".md", ".text"), b"", b"verdict", "an earlier compare output")
VERIFY_JSON = Kind("a verify result", (), b"{", b"expo-prof.verify", "an earlier verify output")
COMPARE_PAGE = Kind("a compare page", (), b"<!doctype html>", b"<title>expo-prof A/B</title>", "an earlier compare output")


def _head(path: Path) -> bytes:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read(4096)
        with open(path, "rb") as f:
            return f.read(4096)
    except (OSError, EOFError, gzip.BadGzipFile):
        return b""


def is_own(path: Path, kind: Kind) -> bool:
    """Whether ``path`` holds expo-prof output of ``kind``."""
    head = _head(path)
    return head.startswith(kind.prefix) and kind.mark in head


#: The special files that are refused (what each is, for the one line); devices of characters and pipes are
#: streams (:func:`is_stream`), directories have their own line.
_SPECIAL = ((stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _own_fd(out: str | Path) -> int | None:
    """The descriptor of this process that ``out`` names — ``-`` (1), ``/dev/stdout``, ``/dev/fd/N``,
    ``/proc/self/fd/N`` — else None. Links are followed one at a time: the last is a descriptor's magic link,
    whose target ("pipe:[…]", or a file the shell opened) must be written through the descriptor itself."""
    if str(out) == "-":
        return 1
    p = os.path.abspath(out)
    for _ in range(16):
        m = re.fullmatch(r"/proc/(\d+)/fd", os.path.realpath(os.path.dirname(p)))
        if m and int(m.group(1)) == os.getpid() and os.path.basename(p).isdigit():
            return int(os.path.basename(p))
        if not os.path.islink(p):
            return None
        p = os.path.join(os.path.dirname(p), os.readlink(p))
    return None


def is_stream(out: str | Path) -> bool:
    """Whether ``out`` is written into rather than replaced: stdout (``-``), an open descriptor of this process,
    a character device or a named pipe (module docstring)."""
    if _own_fd(out) is not None:
        return True
    try:
        mode = os.stat(out).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def is_stdout(out: str | Path | None) -> bool:
    """Whether ``out`` is this process's stdout (``-``, ``/dev/stdout``, ``/dev/fd/1``): the command's summary
    line must then go to stderr, not into the output."""
    return out is not None and _own_fd(out) == 1


def check_target(out: str | Path, inputs: list[Path], kind: Kind, option: str = "-o") -> None:
    """Refuse an output path that is an input, a directory, a special file, has the wrong suffix, or is an
    existing file that is not expo-prof output of the same kind (one line naming ``option``). ``-`` (stdout) and
    the other streams (:func:`is_stream`) are always fine."""
    if str(out) == "-":
        return
    out = Path(out)
    name = out.name.lower()
    # An option with an optional value can swallow the next argument: say how to avoid it.
    hint = f"; put {option} last, or write {option}=FILE / {option}=-" if option == "--json" else ""
    # The input first: writing onto it is the mistake to name, whatever its suffix.
    resolved = out.resolve()
    for p in inputs:
        if resolved == Path(p).resolve():
            raise BadInput(f"{option} {out} would overwrite an input{hint}")
    if is_stream(out):  # a device, a pipe, a descriptor: written into, nothing replaced
        return
    if kind.suffixes and not name.endswith(kind.suffixes):
        raise BadInput(f"{option} {out}: {kind.what} can only be written to a file ending in "
                       f"{' or '.join(kind.suffixes)}")
    if out.is_dir():
        raise BadInput(f"{option} {out} is a directory; give a file name")
    try:
        mode = out.stat().st_mode
    except OSError:
        mode = 0  # not there (yet): a new file
    for test, what in _SPECIAL:
        if test(mode):
            raise BadInput(f"{option} {out} is {what}, not a file; refusing to write to it")
    if out.exists() and (not out.is_file() or (out.stat().st_size and not is_own(out, kind))):
        raise BadInput(f"{option} {out} exists and is not {kind.own}; refusing to overwrite it{hint}")
    if not out.parent.exists():
        raise BadInput(f"{option} {out}: folder {out.parent} does not exist")


def write(out: Path, data: str | bytes) -> int:
    """Write ``data`` to ``out`` as :func:`write_chunks` does (gzip for ``.gz``); returns the bytes written."""
    return write_chunks(out, [data.encode("utf-8") if isinstance(data, str) else data])


class _Counted:
    """A binary file that counts what goes through it (a stream's size cannot be asked afterwards)."""

    def __init__(self, f) -> None:
        self.f, self.n = f, 0

    def write(self, b) -> int:
        self.n += len(b)
        return self.f.write(b)

    def flush(self) -> None:
        self.f.flush()


def _copy(f, chunks: Iterable[bytes], gz: bool) -> int:
    """Write ``chunks`` into the open binary file ``f`` (gzip-compressed when ``gz``); the bytes written to ``f``."""
    counted = _Counted(f)
    if gz:
        # filename="": no name in the gzip header (it would be the temporary file's, a different one each run).
        with gzip.GzipFile(filename="", fileobj=counted, mode="wb", compresslevel=6, mtime=0) as z:
            for c in chunks:
                z.write(c)
    else:
        for c in chunks:
            counted.write(c)
    f.flush()
    return counted.n


def _temp_beside(out: Path) -> tuple[Path, int]:
    """A new temporary file beside ``out``, created exclusively, with the mode a new file gets (0o666 less the
    umask, unlike mkstemp's 0o600: the output is shared like any file the user writes)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(64):
        # A long name is shortened: the folder's name limit (255 bytes) must hold the decorations too.
        tmp = out.with_name(f".{out.name[:180]}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {out}")


def _cannot(out: Path, exc: OSError) -> BadInput:
    return BadInput(f"-o {out}: cannot write ({exc.strerror or exc})")


def write_chunks(out: Path, chunks: Iterable[bytes]) -> int:
    """Write output made piece by piece (a large export: never all in memory at once) to ``out``, gzip for
    ``.gz``: a file through a temporary file renamed over it, a stream directly (module docstring); returns the
    bytes written. Any failure — a write error (one line, :class:`BadInput`), Ctrl-C, an exception while the
    chunks are made — removes the temporary file and leaves ``out`` as it was."""
    gz = out.name.endswith(".gz")
    if is_stream(out):
        return _into_stream(out, chunks, gz)
    try:
        tmp, fd = _temp_beside(out)
    except OSError as exc:
        raise _cannot(out, exc) from None
    try:
        with open(fd, "wb") as f:
            n = _copy(f, chunks, gz)
        # No os.fsync before the rename: the outputs are derived from the traces and made again by the same
        # command, and a sync costs seconds on a large export on a slow or network disk. What a power loss can
        # then leave under the name is an empty or earlier file, never a mix of two; the guard (check_target)
        # lets the next run replace an empty file. A Ctrl-C or a full disk, the cases that matter here, are
        # handled without it.
        os.replace(tmp, out)
    except BaseException as exc:
        with signals_held():  # a second Ctrl-C must not stop the clean-up half-way
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _cannot(out, exc) from None
        raise
    return n


def _into_stream(out: Path, chunks: Iterable[bytes], gz: bool) -> int:
    """Write into a stream (stdout, a descriptor, a device, a pipe): there is nothing to replace."""
    fd = _own_fd(out)
    try:
        if fd is not None:
            # What this process printed before comes first; a duplicate, so closing it leaves ``fd`` open.
            sys.stdout.flush()
            sys.stderr.flush()
            f = os.fdopen(os.dup(fd), "wb")
        else:
            f = open(out, "wb")  # noqa: SIM115 - closed below
        with f:
            return _copy(f, chunks, gz)
    except BrokenPipeError:
        raise  # the reader went away (`| head`): expo_prof.cli.main ends quietly
    except OSError as exc:
        raise _cannot(out, exc) from None

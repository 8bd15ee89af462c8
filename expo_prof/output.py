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
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from expo_prof.errors import BadInput


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


def check_target(out: str | Path, inputs: list[Path], kind: Kind, option: str = "-o") -> None:
    """Refuse an output path that is an input, a directory, has the wrong suffix, or is an existing file that
    is not expo-prof output of the same kind (one line naming ``option``). ``-`` (stdout) is always fine."""
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
    if kind.suffixes and not name.endswith(kind.suffixes):
        raise BadInput(f"{option} {out}: {kind.what} can only be written to a file ending in "
                       f"{' or '.join(kind.suffixes)}")
    if out.is_dir():
        raise BadInput(f"{option} {out} is a directory; give a file name")
    if out.exists() and (not out.is_file() or (out.stat().st_size and not is_own(out, kind))):
        raise BadInput(f"{option} {out} exists and is not {kind.own}; refusing to overwrite it{hint}")
    if not out.parent.exists():
        raise BadInput(f"{option} {out}: folder {out.parent} does not exist")


def write(out: Path, data: str | bytes) -> int:
    """Write atomically (temp file + rename), gzip for ``.gz``; returns the bytes written."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if out.name.endswith(".gz"):
        raw = gzip.compress(raw, compresslevel=6, mtime=0)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(raw)
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BadInput(f"-o {out}: cannot write ({exc.strerror or exc})") from None
    return len(raw)


def write_chunks(out: Path, chunks: Iterable[bytes]) -> int:
    """Like :func:`write` for output made piece by piece (a large export): never all in memory at once."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    n = 0
    try:
        raw = open(tmp, "wb")
        f = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if out.name.endswith(".gz") else raw
        try:
            for c in chunks:
                f.write(c)
        finally:
            f.close()
            if f is not raw:
                raw.close()
        n = tmp.stat().st_size
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BadInput(f"-o {out}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n

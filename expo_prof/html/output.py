"""Writing a page or an export: never over an input, never over a file this tool did not write.

Two guards, because ``-o`` takes any path: the output must have the suffix of
what is written (``.html`` / ``.htm`` for pages, ``.json`` / ``.json.gz`` for
exports), and an existing file is only replaced when its first bytes show it
is expo-prof output of the same kind (a page's generator tag, an export's
header) — a README or a trace is never overwritten.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

from expo_prof.errors import BadInput


@dataclass(frozen=True)
class Kind:
    """What a command writes: allowed suffixes and how its own files begin."""

    what: str
    suffixes: tuple[str, ...]
    prefix: bytes
    mark: bytes


PAGE = Kind("an HTML page", (".html", ".htm"), b"<!DOCTYPE html>", b'<meta name="generator" content="expo-prof')
EXPORT = Kind("a Chrome-trace JSON", (".json", ".json.gz"), b'{"schemaVersion":1,"displayTimeUnit":"ns"', b'"tool":"expo-prof')


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


def check_target(out: Path, inputs: list[Path], kind: Kind) -> None:
    """Refuse an output path that is an input, a directory, has the wrong suffix, or is
    an existing file that is not expo-prof output of the same kind."""
    name = out.name.lower()
    if not name.endswith(kind.suffixes):
        raise BadInput(f"-o {out}: {kind.what} is written to a file ending in {' or '.join(kind.suffixes)}")
    resolved = out.resolve()
    for p in inputs:
        if resolved == p.resolve():
            raise BadInput(f"-o {out} is an input; choose another output file")
    if out.is_dir():
        raise BadInput(f"-o {out} is a directory; give a file name")
    if out.exists() and (not out.is_file() or (out.stat().st_size and not is_own(out, kind))):
        raise BadInput(f"-o {out} exists and is not expo-prof output; refusing to overwrite it")
    if not out.parent.exists():
        raise BadInput(f"-o {out}: folder {out.parent} does not exist")


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

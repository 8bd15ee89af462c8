"""A SQLite file opened without ever writing next to it: read-only *and* immutable (``?mode=ro&immutable=1``).

Profiler databases (torch_npu / msprof, Nsight Systems exports) can be in WAL
mode, and even a read-only open would otherwise create ``-wal``/``-shm`` files
next to the user's data. Shared by the Ascend and Nsight Systems readers and
by format detection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from expo_prof.errors import BadInput


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open a SQLite file without ever writing next to it (read-only, immutable)."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True)
        # Damaged TEXT cells must not stop the read: undecodable bytes become U+FFFD.
        con.text_factory = lambda b: b.decode("utf-8", "replace")
        con.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise BadInput(f"{path}: not a readable SQLite database ({exc})") from None
    except UnicodeDecodeError:  # sqlite's own message about a damaged schema is not UTF-8
        raise BadInput(f"{path}: damaged SQLite database (unreadable schema)") from None
    return con


@contextmanager
def reading(path: Path, max_bytes: int | None) -> Iterator[sqlite3.Connection]:
    """A profiler database open read-only (under the size cap); SQLite's errors inside become one-line BadInput."""
    where = str(path)
    if max_bytes is not None and path.stat().st_size > max_bytes:
        raise BadInput(f"{where}: {path.stat().st_size / 1e6:.1f} MB is over the size cap (raise --max-bytes)")
    con = connect_readonly(path)
    try:
        yield con
    except sqlite3.Error as exc:
        raise BadInput(f"{where}: SQLite error while reading ({exc})") from None
    except UnicodeDecodeError:
        raise BadInput(f"{where}: damaged SQLite database (undecodable error or text)") from None
    finally:
        con.close()


def text_cells(rows: Iterable[tuple[Any, Any]]) -> tuple[dict[Any, str], int]:
    """A string table's ``(id, value)`` rows as a dict of text, and how many values were not stored as text.

    SQLite does not enforce column types: a BLOB (or a number) where a string belongs is malformed input, not a
    reader error (issue 34: ``startswith`` on bytes was an internal error). A BLOB is read as UTF-8 (undecodable
    bytes become U+FFFD, as in a damaged TEXT cell), anything else by ``str``.
    """
    out: dict[Any, str] = {}
    odd = 0
    for i, v in rows:
        if not isinstance(v, str):
            odd += 1
            v = bytes(v).decode("utf-8", "replace") if isinstance(v, (bytes, memoryview)) else (
                "" if v is None else str(v))
        out[i] = v
    return out, odd

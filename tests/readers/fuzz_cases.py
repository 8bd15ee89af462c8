"""Seeded fuzz cases over the readers: small real files, truncated and byte-mutated.

Every case is a pure function of ``(format, seed)``: CI runs a fixed range of
seeds (``tests/readers/test_reader_fuzz.py``), and ``make fuzz``
(``bench/fuzz_readers.py``) runs new seeds for longer and prints any failing
``(format, seed)`` pair, which then joins :data:`REGRESSIONS` so it is checked
on every run from then on.
"""

from __future__ import annotations

import gzip
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from expo_prof.errors import BadInput
from expo_prof.readers import load
from overlay.events import EventLog

#: Bytes worth inserting: JSON / CSV structure, sign, invalid UTF-8, huge numbers.
TOKENS = [b"\xff", b"\x00", b'"', b"}", b"]", b",", b"\n", b"NaN", b"1e999", b"-", b"\t", b"\xc3", b"{", b"[", b"null",
          b"-1", b"99999999999999999999"]

#: (format, mutations) that a fuzz run once found to break a reader; each stays a fixed case.
#: A mutation is (op, byte offset, payload); see :func:`apply`.
REGRESSIONS: list[tuple[str, str, list[tuple[str, int, bytes | int]]]] = [
    # A "-" at the start of a Duration(us) cell: a negative duration went through unnoticed (fixed in
    # readers/builder.py: clamped to 0 with a warning, like the Chrome reader).
    ("negative duration cell", "kernel_details.csv", [("insert_before", b",53.741,", b"-")]),
    # A "-" before a Kineto "dur" value.
    ("negative Kineto dur", "k.pt.trace.json", [("insert_after", b'"dur": ', b"-")]),
    # Seed 4 of op_summary_1.csv: a 20-digit Step Id overflowed the int64 step column (an internal error,
    # not a clean result; fixed in readers/ascend/kernel_csv.py: such a cell is "no step").
    ("20-digit step id", "op_summary_1.csv", [("insert", 5368, b"1e999"), ("insert", 5353, b"99999999999999999999"),
                                              ("insert", 460, b"\x06={H\xbf")]),
    # Seed 63 of the overlay event log: a 20-digit t0_ns overflowed the int64 column (an internal error;
    # fixed in readers/overlay_log.py: an integer out of range counts as missing).
    ("20-digit overlay t0_ns", "expo-prof-events-h-1.jsonl", [("insert_after", b'"t0_ns":', b"99999999999999999999")]),
]


def overlay_log_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        log = EventLog(d)
        log.configure(backend="cuda", lane="stream", rank=1)
        for i in range(6):
            log.step({"step": i, "rank": 1, "rows": 8, "vocab": 32000, "dtype": "float32", "launched": i % 3 != 0,
                      "used": i % 3 != 0, "fallback": None if i % 3 else "all_greedy", "t0_ns": 10**9 + i * 10**6,
                      "fwd": [0, 900_000], "exp": [1000, 51000], "wait": [905_000, 905_100], "timing": "device"})
        log.notice("info", "test", "fuzz seed")
        log.close()
        return Path(log.path).read_bytes()


def nsys_export_bytes(schema: str = "2022") -> bytes:
    """A GENERATED Nsight Systems export (tests/nsys_gen.py): every table the reader reads, in a few pages."""
    from nsys_gen import write_nsys_export  # type: ignore[import-not-found]  (tests/ is on sys.path)

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "gen.sqlite"
        write_nsys_export(path, schema=schema, processes=1 if schema == "2022" else 2)
        return path.read_bytes()


def _trace_view_prefix(rt: Path, n_events: int = 120) -> bytes:
    # A real torch_npu trace_view.json cut after n complete events and closed again.
    raw = (rt / "msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json").read_bytes()
    pos = 0
    for _ in range(n_events):
        pos = raw.index(b"}, {", pos + 1)
    return raw[: pos + 1] + b"]"


#: File name (which picks the reader) → how to get its bytes from ``../shared/realtraces``.
SEED_FILES: dict[str, Callable[[Path], bytes]] = {
    "k.pt.trace.json": lambda rt: gzip.decompress((rt / "hta/tests/data/trace_compare/base/base.json.gz").read_bytes()),
    "old.pt.trace.json": lambda rt: gzip.decompress(
        (rt / "hta/tests/data/trace_file_list/inference_rank_1.json.gz").read_bytes()),
    "k.pt.trace.json.gz": lambda rt: (rt / "hta/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz").read_bytes(),
    "trace_view.json": _trace_view_prefix,
    "kernel_details.csv": lambda rt: (
        rt / "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv").read_bytes(),
    "op_summary_1.csv": lambda rt: (rt / "msinsight/server/src/test/test_data/test_kernel_parse/op_summary_1.csv").read_bytes(),
    "expo-prof-events-h-1.jsonl": lambda rt: overlay_log_bytes(),
    "msprof_0.db": lambda rt: (rt / "msinsight/server/src/test/test_data/full_db/msprof_0.db").read_bytes(),
    # Nsight Systems exports, found by their tables (not by these names): GENERATED small ones, whose few pages
    # every edit hits, and the real pipit export (nsys 2022.2.1).
    "nsys-2022.sqlite": lambda rt: nsys_export_bytes("2022"),
    "nsys-2024.sqlite": lambda rt: nsys_export_bytes("2024"),
    "saxpy_nsys.sqlite": lambda rt: (rt / "pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite").read_bytes(),
}


#: Cell values worth writing into an nsys export: NULL, text, blobs, floats, the int64 extremes, negatives.
NSYS_CELLS = [None, "x", "12a", b"\xff\x00", 1.5, -1, 0, 2**63 - 1, -(2**63), 10**12, 2**40]


def nsys_cell_edits(seed: int, path: Path) -> list[str]:
    """1 to 6 edits of the SQLite export at ``path`` that keep it a valid database: cells of random rows set to
    odd values, a table dropped, rows deleted (byte edits mostly break the pages; these reach the reader).
    A pure function of ``seed`` and the file; returns what it did."""
    import sqlite3

    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    done = []
    try:
        tables = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'"))
        for _ in range(int(rng.integers(1, 7))):
            t = tables[int(rng.integers(0, len(tables)))]
            op = int(rng.integers(0, 10))
            if op == 0:
                con.execute(f'DROP TABLE "{t}"')
                tables.remove(t)
                done.append(f"drop {t}")
                if not tables:
                    break
                continue
            rowids = [r[0] for r in con.execute(f'SELECT rowid FROM "{t}"')]
            if not rowids:
                continue
            rid = rowids[int(rng.integers(0, len(rowids)))]
            if op == 1:
                con.execute(f'DELETE FROM "{t}" WHERE rowid = ?', (rid,))
                done.append(f"delete {t}#{rid}")
                continue
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
            c = cols[int(rng.integers(0, len(cols)))]
            v = NSYS_CELLS[int(rng.integers(0, len(NSYS_CELLS)))]
            try:
                con.execute(f'UPDATE "{t}" SET "{c}" = ? WHERE rowid = ?', (v, rid))
                done.append(f"{t}.{c}#{rid} = {v!r}")
            except sqlite3.IntegrityError:  # NOT NULL / PRIMARY KEY: the real exports cannot hold it either
                pass
        con.commit()
    finally:
        con.close()
    return done


def mutations(seed: int, size: int) -> list[tuple[str, int, bytes | int]]:
    """1 to 4 random edits of a ``size``-byte file, a pure function of ``seed``."""
    rng = np.random.default_rng(seed)
    out: list[tuple[str, int, bytes | int]] = []
    for _ in range(int(rng.integers(1, 5))):
        pos = int(rng.integers(0, max(size, 1)))
        op = ("trunc", "flip", "insert", "delete", "token")[int(rng.integers(0, 5))]
        if op == "trunc":
            out.append(("trunc", pos, 0))
        elif op == "flip":
            out.append(("flip", pos, int(rng.integers(0, 256))))
        elif op == "insert":
            out.append(("insert", pos, rng.bytes(int(rng.integers(1, 9)))))
        elif op == "delete":
            out.append(("delete", pos, int(rng.integers(1, 65))))
        else:
            out.append(("insert", pos, TOKENS[int(rng.integers(0, len(TOKENS)))]))
    return out


def apply(data: bytes, muts: list[tuple[str, int, bytes | int]]) -> bytes:
    """``data`` with the edits applied in order (offsets clipped to the current length)."""
    b = bytearray(data)
    for op, pos, arg in muts:
        if op in ("insert_before", "insert_after"):  # regressions: at the first occurrence of a marker
            at = bytes(b).index(pos) if isinstance(pos, bytes) else pos
            at += len(pos) if op == "insert_after" and isinstance(pos, bytes) else 0
            if op == "insert_before":
                at += 1  # after the marker's leading separator
            b[at:at] = arg
            continue
        pos = min(pos, len(b))
        if op == "trunc":
            del b[pos:]
        elif op == "flip" and b:
            b[min(pos, len(b) - 1)] = arg
        elif op == "insert":
            b[pos:pos] = arg
        elif op == "delete":
            del b[pos : pos + arg]
    return bytes(b)


def check(path: Path) -> str | None:
    """None when ``path`` reads as consistent Timelines or a one-line BadInput; else what is wrong."""
    try:
        res = load([path])
    except BadInput as exc:
        msg = str(exc)
        if "\n" in msg or "internal error" in msg:
            return f"BadInput not one clean line: {msg!r}"
        return None
    except Exception as exc:  # noqa: BLE001 - exactly what the fuzz run looks for
        return f"uncaught {type(exc).__name__}: {exc}"
    if any("internal error" in why for _, why in res.skipped):
        return f"internal error: {res.skipped}"
    for tl in res.timelines:
        n = len(tl)
        if n == 0:
            return "empty Timeline returned"
        for name in ("dur", "lane", "name", "kind"):
            if len(getattr(tl, name)) != n:
                return f"column {name} has {len(getattr(tl, name))} rows, not {n}"
        if tl.start.dtype != np.int64:
            return f"start dtype {tl.start.dtype}"
        if (tl.dur < 0).any():
            return f"{int((tl.dur < 0).sum())} negative duration(s) kept"
        if tl.lane.max() >= len(tl.lanes) or tl.name.max() >= len(tl.names):
            return "lane or name index out of range"
        if tl.step is not None and len(tl.step) != n:
            return "step column length"
    for w in res.warnings:
        if "\n" in w:
            return f"warning not one line: {w!r}"
    return None


def run_case(data: bytes, name: str, muts, workdir: Path) -> str | None:
    """Write the mutated file under ``workdir`` and check it."""
    p = workdir / name
    p.write_bytes(apply(data, muts))
    try:
        return check(p)
    finally:
        p.unlink(missing_ok=True)

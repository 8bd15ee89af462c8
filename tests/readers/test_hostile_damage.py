"""Hostile input, round 2 (issue 34, items 1, 2, 4, 5): one bad byte, blank runs, deep nesting, wrong-typed cells.

Every hostile file here is GENERATED in the test (nothing committed); the
SQLite cases start from the real databases of ``../shared/realtraces`` and
change the type of their cells. Time is not asserted (docs/testing.md): the
work is, as the bytes given to the chunk decoder, counted by a spy that calls
the real function; bench/bench_ingest.py measures the time.
"""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from expo_prof.errors import BadInput
from expo_prof.readers import load
from expo_prof.readers.chrome import decode, stream, walk, window
from expo_prof.readers.chrome.reader import read_chrome, read_chrome_file

REPO = Path(__file__).resolve().parents[2]
HEAD = b'{"traceEvents": [\n'
TAIL = b'\n], "baseTimeNanoseconds": 0}'


def _events(n: int) -> list[bytes]:
    return [b'{"ph": "X", "cat": "cpu_op", "name": "op%d", "pid": 1, "tid": 1, "ts": %d, "dur": 5, '
            b'"args": {"correlation": %d}}' % (i, 10 * i, i) for i in range(n)]


def _doc(events: list[bytes]) -> bytes:
    return HEAD + b",\n".join(events) + TAIL


def _names(tl) -> list[str]:
    return [tl.names[i] for i in tl.name]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of ~2 KB and a 4 KB window: a file of a few thousand events crosses hundreds of chunk ends."""
    monkeypatch.setattr(decode, "CHUNK_BYTES", 2000)
    monkeypatch.setattr(window, "CAPACITY", 4096)
    monkeypatch.setattr(window, "PIECE", 1024)


def _decoded_bytes(monkeypatch, path: Path) -> tuple[int, object]:
    """Bytes handed to the chunk decoder (every attempt counted) while ``path`` is read, and the Timeline."""
    seen = [0]
    real = decode.decode_chunk

    def spy(buf, s, e, c):
        seen[0] += e - s
        return real(buf, s, e, c)

    mods = [decode, stream] + [m for m in (sys.modules.get("expo_prof.readers.chrome.damage"),) if m]
    for mod in mods:
        monkeypatch.setattr(mod, "decode_chunk", spy)
    tl = read_chrome_file(path)
    return seen[0], tl


BAD_VALUES = [b"NaN", b"Infinity", b"+1", b"'single-quoted'", b"5,"]  # "5," : a trailing comma in the object


def test_one_bad_byte_costs_what_the_clean_file_costs(tmp_path, monkeypatch, small_chunks):
    """GIVEN GENERATED traces of N and 4N events, each with one NaN where a "dur" belongs after the first
    quarter, and the same files without it
    WHEN read in small chunks
    THEN the bytes decoded grow linearly (4N costs < 6× N; before issue 34 every later chunk end was tried
    from the damaged chunk's start: quadratic) and stay within 2× the clean file's."""
    cost = {}
    for n in (1500, 6000):
        ev = _events(n)
        clean = tmp_path / f"clean-{n}.json"
        clean.write_bytes(_doc(ev))
        ev[n // 4] = ev[n // 4].replace(b'"dur": 5', b'"dur": NaN')
        bad = tmp_path / f"bad-{n}.json"
        bad.write_bytes(_doc(ev))
        c_clean, _ = _decoded_bytes(monkeypatch, clean)
        c_bad, tl = _decoded_bytes(monkeypatch, bad)
        assert len(tl) == n - 1
        assert c_bad <= 2 * c_clean, (n, c_bad, c_clean)
        cost[n] = c_bad
    assert cost[6000] < 6 * cost[1500], cost


@pytest.mark.parametrize("bad", BAD_VALUES, ids=["nan", "infinity", "plus", "single-quote", "trailing-comma"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_only_the_malformed_event_is_skipped(tmp_path, small_chunks, bad, gz):
    """GIVEN a GENERATED trace of 3,000 events whose event 1,000 holds invalid JSON (NaN, Infinity, +1, a
    single-quoted string, a trailing comma)
    WHEN loaded (plain or gzip)
    THEN every other event is read, in order, and one warning counts one malformed event and names where it is
    (before issue 34: the events after byte ~155 K were dropped, 90 % of the file)."""
    ev = _events(3000)
    ev[1000] = ev[1000].replace(b'"dur": 5', b'"dur": ' + bad)
    data = _doc(ev)
    p = tmp_path / ("bad.pt.trace.json.gz" if gz else "bad.pt.trace.json")
    p.write_bytes(gzip.compress(data, 1) if gz else data)
    res = load([p])
    tl = res.timelines[0]
    assert _names(tl) == [f"op{i}" for i in range(3000) if i != 1000]
    at = data.index(bad, data.index(b'"op1000"'))
    warn = [w for w in res.warnings if "malformed" in w]
    assert len(warn) == 1 and "1 malformed event(s) skipped (first: " in warn[0], res.warnings
    # The byte named is where msgspec stopped: the bad value itself (a trailing comma: the "}" after it).
    assert f"at byte {at:,}," in warn[0] or f"at byte {at + len(bad):,}," in warn[0], (at, warn)
    assert "op1000" in warn[0]


def test_damage_in_the_first_and_last_events_and_back_to_back(tmp_path, small_chunks):
    """GIVEN a GENERATED trace whose first event, last event and two consecutive events in the middle hold NaN
    WHEN loaded, from a file and from bytes in memory
    THEN exactly those four are skipped and counted, every other event is read."""
    ev = _events(2000)
    for i in (0, 700, 701, 1999):
        ev[i] = ev[i].replace(b'"ts": ', b'"ts": NaN, "x": ')
    p = tmp_path / "bad.json"
    p.write_bytes(_doc(ev))
    want = [f"op{i}" for i in range(2000) if i not in (0, 700, 701, 1999)]
    for tl in (read_chrome_file(p), read_chrome(bytearray(p.read_bytes()), p)):
        assert _names(tl) == want
        assert any("4 malformed event(s) skipped" in w for w in tl.warnings), tl.warnings


def test_a_raw_control_character_is_repaired_in_place(tmp_path, monkeypatch, small_chunks):
    """GIVEN a GENERATED trace of 3,000 events with one raw control character (0x01) inside a name, and the
    same file without it
    WHEN read
    THEN all 3,000 events are kept, the character is a space in the name, one warning counts it, and the bytes
    decoded stay within 2× the clean file's (before issue 34: 1 m 37 s for 10,000 events)."""
    ev = _events(3000)
    clean = tmp_path / "clean.json"
    clean.write_bytes(_doc(ev))
    ev[1000] = ev[1000].replace(b'"op1000"', b'"op\x011000"')
    p = tmp_path / "ctrl.json"
    p.write_bytes(_doc(ev))
    c_clean, _ = _decoded_bytes(monkeypatch, clean)
    c_bad, tl = _decoded_bytes(monkeypatch, p)
    assert _names(tl)[999:1002] == ["op999", "op 1000", "op1001"] and len(tl) == 3000
    assert any("1 raw control character(s) inside strings replaced by spaces" in w for w in tl.warnings)
    assert c_bad <= 2 * c_clean, (c_bad, c_clean)


@pytest.mark.slow
def test_a_file_broken_in_every_event_is_not_held(tmp_path, monkeypatch):
    """GIVEN a GENERATED trace of 40,000 events (3.4 MB), every one but the last with "dur": NaN
    WHEN read (the damaged stretch dropped past 64 KB for the test; 8 MB in use)
    THEN the last event is read, the others counted as malformed, and the Python heap stays under 1.5 MB: the
    one long damaged stretch is not held until its end."""
    monkeypatch.setattr(walk, "_HOLD_DAMAGE", 1 << 16)
    monkeypatch.setattr(window, "CAPACITY", 1 << 16)
    monkeypatch.setattr(window, "PIECE", 1 << 14)
    ev = [e.replace(b'"dur": 5', b'"dur": NaN') for e in _events(40_000)]
    ev[-1] = _events(40_000)[-1]
    p = tmp_path / "all-bad.json"
    p.write_bytes(_doc(ev))
    tracemalloc.start()
    try:
        tl = read_chrome_file(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert _names(tl) == ["op39999"]
    warn = [w for w in tl.warnings if "malformed event(s) skipped" in w]
    assert len(warn) == 1 and "39999 malformed event(s) skipped" in warn[0], warn
    assert peak < 1.5 * (1 << 20), peak


# --------------------------------------------------------------------------- item 2: blank runs


_BLANK = b"\n" * (24 << 20)
_BLANK_PLACES = {
    # name: (document, names of the events read; None: "trace holds no events")
    "empty-array": (HEAD + _BLANK + TAIL, None),
    "after-the-events": (HEAD + b",\n".join(_events(5)) + _BLANK + TAIL, [f"op{i}" for i in range(5)]),
    "before-the-events-key": (b"{" + _BLANK + HEAD[1:] + b",\n".join(_events(5)) + TAIL, [f"op{i}" for i in range(5)]),
}


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("place", list(_BLANK_PLACES))
def test_blank_runs_are_read_in_a_fixed_window(tmp_path, gz, place):
    """GIVEN a GENERATED trace with 24 MB of newlines as its whole event array, after its events, or before its
    "traceEvents" key
    WHEN read THEN the Python heap peaks under 8 MB (one window; before issue 34 the empty array and the blank
    head sent the file whole to the careful path, where the blanks were walked back a byte at a time: 10 s for
    64 MB) and the events are read (none: "trace holds no events")."""
    data, want = _BLANK_PLACES[place]
    p = tmp_path / ("blank.json.gz" if gz else "blank.json")
    p.write_bytes(gzip.compress(data, 1) if gz else data)
    tracemalloc.start()
    try:
        if want is not None:
            assert _names(read_chrome_file(p)) == want
        else:
            with pytest.raises(BadInput, match="trace holds no events"):
                read_chrome_file(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


# --------------------------------------------------------------------------- item 4: deep nesting

_DEEP = 100_000
_DEEP_FILES = {
    "top": b"[" * _DEEP + b"]" * _DEEP,
    "in-traceEvents": HEAD + b"[" * _DEEP + b"]" * _DEEP + TAIL,
    "in-args": HEAD + _events(1)[0][:-2] + b', "deep": ' + b'{"a": ' * _DEEP + b"1" + b"}" * _DEEP + b"}}" + TAIL,
    "top-level-key": b'{"x": ' + b"[" * _DEEP + b"]" * _DEEP + b", " + HEAD[1:] + _events(1)[0] + TAIL,
}


@pytest.mark.parametrize("where", list(_DEEP_FILES))
def test_deep_nesting_is_a_one_line_error(tmp_path, where):
    """GIVEN a GENERATED trace nested 100,000 levels deep (at the top, in traceEvents, in an event's args, in a
    top-level key)
    WHEN loaded THEN a one-line BadInput (exit code 2) says it is nested deeper than the limit, never
    "internal error … RecursionError"."""
    p = tmp_path / "deep.pt.trace.json"
    p.write_bytes(_DEEP_FILES[where])
    with pytest.raises(BadInput) as ei:
        load([p])
    msg = str(ei.value)
    assert ei.value.exit_code == 2 and "\n" not in msg
    assert f"JSON nested deeper than {sys.getrecursionlimit()} levels" in msg and "internal error" not in msg


def test_deep_nesting_from_the_cli(tmp_path):
    """GIVEN the GENERATED 100,000-deep array WHEN ``expo-prof analyze`` reads it THEN exit code 2 and one line."""
    p = tmp_path / "deep.pt.trace.json"
    p.write_bytes(_DEEP_FILES["top"])
    run = subprocess.run([sys.executable, "-m", "expo_prof", "analyze", str(p)], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert run.returncode == 2 and len(lines) == 1 and "nested deeper than" in lines[0], run.stderr


# --------------------------------------------------------------------------- item 5: wrong-typed SQLite cells

NPU_DB = "msinsight/test/data/pytorch/db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
DBS = {
    "torch_npu": NPU_DB,
    "msprof": "msinsight/server/src/test/test_data/full_db/msprof_0.db",
    "nsys": "pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
}


def _retype(src: Path, dst: Path, how: str) -> None:
    """Copy ``src`` to ``dst`` with every cell of every table set to ``how`` (SQL, ``{c}`` the column)."""
    shutil.copy(src, dst)
    dst.chmod(0o644)
    con = sqlite3.connect(dst)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for t in tables:
        for _cid, col, *_ in con.execute(f'PRAGMA table_info("{t}")').fetchall():
            try:
                con.execute(f'UPDATE "{t}" SET "{col}" = ' + how.format(c=f'"{col}"'))
            except sqlite3.Error:
                pass  # a constraint: that column keeps its type
    con.commit()
    con.close()


def test_blob_strings_in_a_torch_npu_db_are_read_as_text(rt, tmp_path):
    """GIVEN the real torch_npu DB with its STRING_IDS values stored as BLOBs (the issue's file)
    WHEN loaded THEN it reads as the original does (same names, times), with a warning counting the BLOBs
    (before issue 34: "internal error while reading: TypeError: startswith first arg must be bytes")."""
    src = rt / NPU_DB
    dst = tmp_path / src.name
    shutil.copy(src, dst)
    dst.chmod(0o644)
    con = sqlite3.connect(dst)
    n = con.execute("UPDATE STRING_IDS SET value = CAST(value AS BLOB)").rowcount
    con.commit()
    con.close()
    want = load([src]).timelines[0]
    res = load([dst])
    got = res.timelines[0]
    assert _names(got) == _names(want) and got.start.tolist() == want.start.tolist()
    assert any(f"{n} STRING_IDS value(s) not stored as text" in w for w in res.warnings), res.warnings


@pytest.mark.parametrize("how", ["CAST({c} AS BLOB)", "CAST({c} AS TEXT)", "CAST({c} AS REAL) + 0.5", "X'FF00'"],
                         ids=["blob", "text", "real", "bad-blob"])
@pytest.mark.parametrize("db", list(DBS))
def test_every_reader_takes_wrong_typed_columns_as_malformed_input(rt, tmp_path, db, how):
    """GIVEN a real profiler DB (torch_npu, msprof, Nsight Systems export) with every column of every table
    retyped (BLOB, TEXT, REAL, a raw non-UTF-8 BLOB)
    WHEN loaded THEN a Timeline or a one-line BadInput, never an internal error."""
    src = rt / DBS[db]
    dst = tmp_path / src.name
    _retype(src, dst, how)
    try:
        res = load([dst])
    except BadInput as exc:
        assert "internal error" not in str(exc) and "\n" not in str(exc), str(exc)
    else:
        assert not [s for s in res.skipped if "internal error" in str(s)], res.skipped

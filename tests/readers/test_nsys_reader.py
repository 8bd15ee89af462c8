"""Nsight Systems SQLite exports: the real pipit export (nsys 2022.2.1) and GENERATED ones (tests/nsys_gen.py).

Expected figures come from plain sqlite3 queries on the same file (the real one) or from the construction of
the generated ones, never from the reader's output.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from nsys_gen import EXP_KERNEL, MAIN, SIDE, STEP_NS, gtid, write_nsys_export  # type: ignore[import-not-found]

from expo_prof.analysis.steps.windows import launch_start
from expo_prof.errors import BadInput
from expo_prof.readers import load
from expo_prof.timeline import Kind, LaneKind
from overlay.contract import SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT

PIPIT = "pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"


def _q(path: Path, sql: str):
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _rows(tl, kind, lane_kind):
    lk = np.array([ln.kind for ln in tl.lanes])[tl.lane]
    return np.flatnonzero((tl.kind == kind) & (lk == lane_kind))


def test_the_real_pipit_export_gives_sqlite3s_own_counts_and_sums(rt):
    # GIVEN the real nsys 2022.2.1 export of an A100 MPI + CUDA saxpy
    path = rt / PIPIT
    # WHEN it is loaded
    (tl,) = load([path]).timelines
    # THEN every kernel is there, on its stream, with its exact ns, as plain sqlite3 counts them
    (n, total), = _q(path, 'SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL')
    kern = _rows(tl, Kind.KERNEL, LaneKind.STREAM)
    assert (len(kern), int(tl.dur[kern].sum())) == (n, total) == (5, 88_573_480)
    per_stream = dict(_q(path, "SELECT streamId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY streamId"))
    got = {}
    for r in kern:
        got[tl.lanes[tl.lane[r]].tid] = got.get(tl.lanes[tl.lane[r]].tid, 0) + 1
    assert got == per_stream == {7: 5}
    starts = sorted(s for (s,) in _q(path, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    assert tl.start.dtype == np.int64 and sorted(tl.start[kern].tolist()) == starts
    # AND the kernels carry their demangled names from StringIds
    (name,), = _q(path, "SELECT value FROM StringIds WHERE id = (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    assert {tl.names[tl.name[r]] for r in kern} == {name} == {"saxpy(double *, double *, double *, double, int)"}
    # AND copies, runtime calls and NVTX ranges (push/pop and start/end, ended) are all there
    (copies,), = _q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    (calls,), = _q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    (ranges,), = _q(path, 'SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND "end" IS NOT NULL')
    assert len(_rows(tl, Kind.MEMCPY, LaneKind.STREAM)) == copies == 15
    assert len(_rows(tl, Kind.RUNTIME, LaneKind.THREAD)) == calls == 95
    assert len(_rows(tl, Kind.ANNOTATION, LaneKind.THREAD)) == ranges == 22
    # AND the version table is read (EXPORT_META_DATA: nsys 2022), without its paths or user
    assert tl.fmt == "nsys" and tl.meta["fmt_version"] == "nsys 2022.2.1.31, export schema 2.9.1"
    assert tl.meta["nsys"]["table"] == "EXPORT_META_DATA" and "EXPORT_USER" not in tl.meta["nsys"]
    assert tl.meta["devices"] == ["NVIDIA A100-SXM4-40GB"]
    # AND the high-priority stream's priority is the signed value CUDA gave it
    assert {s["stream"]: s["priority"] for s in tl.meta["cuda_streams"]}[12] == -5
    # AND each kernel's launch is the first runtime call of its correlationId, as with Kineto (this export has
    # two per kernel: cudaLaunchKernel and, nested in it, cudaLaunchKernel_v7000)
    launch = launch_start(tl)
    corr = dict(_q(path, "SELECT k.start, min(r.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                         "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId GROUP BY k.start"))
    assert {int(tl.start[r]): int(launch[r]) for r in kern} == corr


def test_detected_by_content_not_by_name(rt, tmp_path):
    # GIVEN the real export under a name no rule knows, and inside a folder as a .db
    odd = tmp_path / "profile.bin"
    shutil.copyfile(rt / PIPIT, odd)
    d = tmp_path / "dir"
    d.mkdir()
    shutil.copyfile(rt / PIPIT, d / "rank0.db")
    # WHEN each is loaded THEN both are read as nsys exports
    assert [t.fmt for t in load([odd]).timelines] == ["nsys"]
    assert [t.fmt for t in load([d]).timelines] == ["nsys"]
    # GIVEN a SQLite file without an nsys table WHEN loaded THEN one line saying what it is
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")  # a string table alone is not enough
    con.commit()
    con.close()
    with pytest.raises(BadInput, match="SQLite database without the tables of a known profiler") as ei:
        load([other])
    assert "\n" not in str(ei.value)


def test_opened_read_only_without_side_files_even_in_wal_mode(rt, tmp_path):
    # GIVEN a copy of the real export switched to WAL mode (where a plain read-only open creates -wal/-shm)
    path = tmp_path / "wal.sqlite"
    shutil.copyfile(rt / PIPIT, path)
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()
    before = (sorted(p.name for p in tmp_path.iterdir()), path.read_bytes())
    # WHEN it is loaded
    assert load([path]).timelines
    # THEN nothing was written next to it and its bytes are unchanged
    assert (sorted(p.name for p in tmp_path.iterdir()), path.read_bytes()) == before


def test_generated_2022_export_kinds_lanes_and_launches(tmp_path):
    # GIVEN a GENERATED export in the 2022 schema (every optional table)
    path = tmp_path / "gen.sqlite"
    write_nsys_export(path)
    (tl,) = load([path]).timelines
    names = np.array(tl.names, dtype=object)[tl.name]
    lanes = [tl.lanes[i] for i in tl.lane]
    # THEN kernels sit on the streams they ran on, copies are MEMCPY, the stream sync is not busy time
    kern = _rows(tl, Kind.KERNEL, LaneKind.STREAM)
    assert len(kern) == 9 and {lanes[r].tid for r in kern} == {MAIN, SIDE}
    assert {lanes[r].tid for r in kern if names[r] == EXP_KERNEL} == {SIDE}
    assert sorted(set(names[_rows(tl, Kind.MEMCPY, LaneKind.STREAM)])) == ["Memcpy HtoD"]
    assert sorted(set(names[_rows(tl, Kind.OTHER, LaneKind.STREAM)])) == ["Stream Sync"]
    # AND the host thread is named from ThreadNames, its NVTX ranges read from `text`
    host = {ln.name for ln in tl.lanes if ln.kind == LaneKind.THREAD}
    assert host == {"VllmWorker"}
    spans = names[_rows(tl, Kind.ANNOTATION, LaneKind.THREAD)]
    assert sorted(set(spans)) == sorted({"execute_context_0(0)_generation_8(8)", SPAN_EXPONENTIAL, SPAN_FORWARD,
                                        SPAN_WAIT})
    # AND the overlay's ranges that launched work are also on the device: the draw on the side stream exactly
    # over its kernel, the forward on the main stream from its first kernel to its last; the wait launched none
    dev = _rows(tl, Kind.ANNOTATION, LaneKind.STREAM)
    got = sorted((names[r], lanes[r].tid, int(tl.start[r]), int(tl.start[r] + tl.dur[r])) for r in dev)
    exp = sorted([(SPAN_EXPONENTIAL, SIDE, STEP_NS * (k + 1) + a, STEP_NS * (k + 1) + b)
                  for k, (a, b) in enumerate(((150_000, 250_000), (650_000, 750_000), (800_000, 880_000)))]
                 + [(SPAN_FORWARD, MAIN, STEP_NS * (k + 1) + 100_000, STEP_NS * (k + 1) + 700_000) for k in range(3)])
    assert got == exp
    # AND those device windows are launched when their first launch ran (the step they belong to)
    launch = launch_start(tl)
    assert sorted(int(launch[r]) for r in dev if names[r] == SPAN_EXPONENTIAL) == [
        STEP_NS * (k + 1) + 20_000 for k in range(3)]
    # AND the unterminated range is skipped with a one-line warning naming the file
    assert any(str(path) in w and "1 NVTX range(s) without an end" in w for w in tl.warnings)


def test_generated_2024_export_with_two_gpu_processes_gives_two_ranks(tmp_path):
    # GIVEN a GENERATED newer export: META_DATA_EXPORT, NVTX names only through textId, no optional tables,
    # two worker processes on cuda:0 and cuda:1 and an API server with host ranges only
    path = tmp_path / "gen.sqlite"
    write_nsys_export(path, schema="2024", processes=2)
    res = load([path])
    # THEN one Timeline per GPU process, numbered by device, each with its own threads and streams only
    assert [t.rank for t in res.timelines] == [0, 1]
    for rank, tl in enumerate(res.timelines):
        assert {ln.device for ln in tl.lanes if ln.kind == LaneKind.STREAM} == {f"cuda:{rank}"}
        assert {(ln.pid, ln.tid) for ln in tl.lanes if ln.kind == LaneKind.THREAD} == {(4242 + rank, 4242 + rank)}
        names = set(np.array(tl.names, dtype=object)[tl.name])
        assert {SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT} <= names and "api_server: request" not in names
        assert tl.meta["fmt_version"] == "nsys 2024.6.2.225, export schema 3.16.1"
        assert tl.meta["nsys"]["table"] == "META_DATA_EXPORT"
        # no copies, sets or syncs: those tables are absent, which is no error
        assert not (tl.kind == Kind.MEMCPY).any() and not (tl.kind == Kind.OTHER).any()
        # correlation ids stay per process: each rank's kernels map to its own launches
        launch = launch_start(tl)
        kern = _rows(tl, Kind.KERNEL, LaneKind.STREAM)
        assert all(launch[r] < tl.start[r] for r in kern)


def _minimal(path: Path, *tables: str) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT)")
    for t in tables:
        con.execute(t)
    return con


def test_tables_created_lazily_missing_tables_mean_no_events(tmp_path):
    # GIVEN an export with NVTX ranges only (nsys --trace=nvtx)
    path = tmp_path / "nvtx-only.sqlite"
    con = _minimal(path, "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
                         "text TEXT, globalTid INTEGER, textId INTEGER)")
    con.execute("INSERT INTO NVTX_EVENTS VALUES (100, 200, 59, 'region', ?, NULL)", (gtid(7, 8),))
    con.commit()
    con.close()
    # WHEN loaded THEN the range is there, on thread 8 of process 7, and a warning says there is no GPU work
    (tl,) = load([path]).timelines
    assert (tl.names[tl.name[0]], tl.lanes[tl.lane[0]].pid, tl.lanes[tl.lane[0]].tid) == ("region", 7, 8)
    assert any("no GPU activity" in w for w in tl.warnings)
    # GIVEN an export with no event table at all WHEN loaded THEN one line saying so
    empty = tmp_path / "empty.sqlite"
    _minimal(empty).close()
    with pytest.raises(BadInput, match="holds no kernels, copies, CUDA API calls or NVTX ranges"):
        load([empty])


def test_damaged_rows_are_skipped_and_times_stay_exact(tmp_path):
    # GIVEN kernels with an end before the start, a text start, a NULL end, an overflowing span, and one at 2**62
    path = tmp_path / "rows.sqlite"
    con = _minimal(path, "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
                         "streamId INTEGER, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, "
                         "shortName INTEGER)")
    con.execute("INSERT INTO StringIds VALUES (1, 'k')")
    big = 2**62 + 1  # a float64 would round this
    rows = [(big, big + 3), (50, 40), ("12a", 60), (10, None), (-(2**63), 2**63 - 1)]
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, 1, 0, 1, 1)", rows)
    con.commit()
    con.close()
    # WHEN loaded THEN the one good row is kept to the ns, and a warning counts the four skipped
    res = load([path])
    (tl,) = res.timelines
    assert (tl.start.tolist(), tl.dur.tolist()) == ([big], [3])
    assert any("4 row(s) with missing, reversed or overflowing start/end skipped" in w for w in res.warnings)

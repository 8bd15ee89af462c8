"""torch_npu outputs (trace_view.json, kernel_details.csv, ascend_pytorch_profiler_*.db) on the real files.

Expectations are recomputed from the same files with json / csv / sqlite3 / Decimal.
"""

from __future__ import annotations

import csv
import shutil
import sqlite3
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from readers_helpers import plain_json, us_to_ns

from expo_prof.readers import load
from expo_prof.timeline import Kind, LaneKind

TV = "msinsight/test/data/pytorch/text/{level}/{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
TRACE_VIEWS = [
    TV.format(level="level0", rank="rank0"),
    TV.format(level="level1", rank="rank0"),
    TV.format(level="level1", rank="rank1"),
    "msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json",
]
KERNEL_CSVS = [
    "msinsight/server/src/test/test_data/test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/server/src/test/test_data/test_rank_1/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/test/data/pytorch/text/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/test/data/pytorch/text/level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/test/st/level2/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msinsight/test/st/level2/rank_2_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "msprof-analyze/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv",
    "msprof-analyze/test/ut/advisor/compute_advice/data/kernel_details.csv",
]
DB_L1 = "msinsight/test/data/pytorch/db/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"
DB_L0 = "msinsight/test/data/pytorch/db/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"


def _procs(events):
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return procs, threads


# --------------------------------------------------------------------------- trace_view.json


@pytest.mark.parametrize("rel", TRACE_VIEWS)
def test_trace_view_hardware_lanes_per_stream(rt, rel):
    """GIVEN a real torch_npu trace_view.json (bare array, string timestamps)
    WHEN it is loaded
    THEN there is one STREAM lane per 'Stream N' thread of the 'Ascend Hardware' process, holding exactly the
    tasks the file puts there, with start = the string ts parsed exactly and dur within 0.5 ns of the file's value."""
    path = rt / rel
    events = plain_json(path)
    assert isinstance(events, list)
    procs, threads = _procs(events)
    hw = [e for e in events if e.get("ph") == "X" and procs.get(e["pid"]) == "Ascend Hardware"]
    ref = Counter(threads.get((e["pid"], e["tid"]), f"Stream {e['tid']}") for e in hw)

    tl = load([path]).timelines[0]
    assert tl.fmt == "ascend-trace-view" and tl.backend == "npu"
    stream = np.array([tl.lanes[i].kind == LaneKind.STREAM for i in tl.lane], dtype=bool)
    got = Counter(tl.lanes[i].name for i in tl.lane[stream])
    assert got == ref

    ref_start = sorted(us_to_ns(e["ts"]) for e in hw)
    assert sorted(tl.start[stream].tolist()) == ref_start
    exact_dur = sorted(Decimal(str(e["dur"])) * 1000 for e in hw)
    got_dur = sorted(tl.dur[stream].tolist())
    assert all(abs(Decimal(g) - x) <= Decimal("0.5") for g, x in zip(got_dur, exact_dur))
    # Task Type decides the kind: compute tasks are kernels, EVENT_*/PLACE_HOLDER are not busy time.
    n_sync = sum(1 for e in hw if str(e["args"].get("Task Type", "")).startswith(("EVENT_", "PLACE_HOLDER")))
    assert int((tl.kind[stream] == Kind.OTHER).sum()) == n_sync


def test_trace_view_string_timestamps_are_exact_where_float64_is_not(rt):
    """GIVEN the real level1 trace_view.json WHEN loaded THEN hardware task starts equal the decimal strings to
    the ns, and for some of them a float64 of the µs string would have been off (so the exact path matters)."""
    path = rt / TV.format(level="level1", rank="rank0")
    events = plain_json(path)
    procs, _ = _procs(events)
    hw_ts = [e["ts"] for e in events if e.get("ph") == "X" and procs.get(e["pid"]) == "Ascend Hardware"]
    tl = load([path]).timelines[0]
    starts = set(tl.start.tolist())
    assert all(us_to_ns(t) in starts for t in hw_ts)
    float_off = [t for t in hw_ts if round(float(t) * 1000) != us_to_ns(t)]
    assert len(float_off) > len(hw_ts) // 2


def test_trace_view_kinds_steps_and_hccl_groups(rt):
    """GIVEN the level1 trace_view.json (compute on stream 2, DSA RNG on 3, HCCL on 4, a 'Group 0 Communication' lane)
    WHEN loaded THEN HCCL tasks on stream 4 are COMM, the group's hcom_* ops are COMM on a LOGICAL lane,
    HCCL 'Plane' and 'Overlap Analysis' duplicates are dropped, and ProfilerStep#50 is a STEP with id 50."""
    path = rt / TV.format(level="level1", rank="rank0")
    events = plain_json(path)
    procs, threads = _procs(events)
    tl = load([path]).timelines[0]
    by_lane = {tl.lanes[i].name: i for i in range(len(tl.lanes))}

    s4 = [e for e in events if e.get("ph") == "X" and procs.get(e["pid"]) == "Ascend Hardware" and e["tid"] == 4]
    n_comm_tasks = sum(1 for e in s4 if e["args"]["Task Type"] in ("Notify Wait", "Write Value", "SDMA"))
    assert int(((tl.lane == by_lane["Stream 4"]) & (tl.kind == Kind.COMM)).sum()) == n_comm_tasks

    group = [e for e in events if e.get("ph") == "X" and procs.get(e["pid"]) == "HCCL"
             and "Communication" in threads.get((e["pid"], e["tid"]), "")]
    glane = [i for i, ln in enumerate(tl.lanes) if ln.kind == LaneKind.LOGICAL]
    assert len(glane) == 1 and tl.lanes[glane[0]].name == "HCCL Group 0 Communication"
    assert int((tl.lane == glane[0]).sum()) == len(group)
    assert not any("Plane" in ln.name or "Overlap" in ln.name for ln in tl.lanes)

    steps = tl.kind == Kind.STEP
    assert tl.step[steps].tolist() == [50] and tl.names[tl.name[steps][0]] == "ProfilerStep#50"
    # DSA RNG (dropout mask) on stream 3 is a kernel: a real example of device RNG on a side stream.
    s3 = tl.lane == by_lane["Stream 3"]
    assert {tl.names[i] for i in tl.name[s3 & (tl.kind == Kind.KERNEL)]} == {
        "aclnnDropoutGenMaskV2_DSAGenBitMask_DSAGenBitMask"}


def test_ascend_rank_from_profiler_info(rt):
    """GIVEN the rank1 output (profiler_info_1.json, rank_id 1) WHEN its trace_view.json is loaded THEN rank is 1."""
    tl = load([rt / TV.format(level="level1", rank="rank1")]).timelines[0]
    assert tl.rank == 1


def test_directory_attaches_step_trace_time_and_prefers_trace_view(rt):
    """GIVEN a *_ascend_pt directory with trace_view.json, kernel_details.csv and step_trace_time.csv
    WHEN the directory is loaded THEN trace_view.json is read (kernel_details.csv skipped with a reason) and the
    step_trace_time columns, incl. Overlapped, are in meta with exact ns."""
    d = rt / "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt"
    res = load([d])
    assert [tl.fmt for tl in res.timelines] == ["ascend-trace-view"]
    assert any(p.name == "kernel_details.csv" and "trace_view.json" in why for p, why in res.skipped)
    stt = res.timelines[0].meta["step_trace_time"]
    with open(d / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert stt["step"].tolist() == [int(r["Step"]) for r in rows]
    assert stt["us"]["Overlapped"].tolist() == [float(r["Overlapped"]) for r in rows]
    assert stt["ns"]["Overlapped"].tolist() == [us_to_ns(r["Overlapped"]) for r in rows]


# --------------------------------------------------------------------------- kernel_details.csv


def _csv_rows(path: Path):
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("rel", KERNEL_CSVS)
def test_kernel_details_rows_per_stream(rt, rel):
    """GIVEN a real kernel_details.csv (2023/2025 layouts, trailing-tab start times, level0 without Stream ID)
    WHEN loaded THEN every row is an event on the lane of its Stream ID (HCCL rows with 'N/A' on the logical
    'HCCL communication' lane), with start parsed exactly from the text and Step Id in Timeline.step."""
    path = rt / rel
    rows = _csv_rows(path)
    res = load([path])
    tl = res.timelines[0]
    assert len(tl) == len(rows)

    def lane_of(r):
        sid = r.get("Stream ID")
        if r["Accelerator Core"] in ("HCCL", "COMMUNICATION") and (sid is None or not sid.isdigit()):
            return "HCCL communication"
        return "Stream ?" if sid is None else f"Stream {sid}"

    assert Counter(tl.lanes[i].name for i in tl.lane) == Counter(lane_of(r) for r in rows)
    assert sorted(tl.start.tolist()) == sorted(us_to_ns(r["Start Time(us)"]) for r in rows)
    assert sorted(tl.dur.tolist()) == sorted(us_to_ns(r["Duration(us)"]) for r in rows)
    assert sorted(tl.step.tolist()) == sorted(int(r["Step Id"]) for r in rows)
    assert int((tl.kind == Kind.COMM).sum()) == sum(r["Accelerator Core"] in ("HCCL", "COMMUNICATION") for r in rows)
    if "Stream ID" not in rows[0]:
        assert any("no Stream ID column" in w for w in res.warnings)


def test_kernel_details_trailing_tab_value(rt):
    """GIVEN the level1 kernel_details.csv whose first Start Time cell is '1736408883704643.212<TAB>'
    WHEN loaded THEN that kernel starts at exactly 1736408883704643212 ns."""
    path = rt / "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    first = _csv_rows(path)[0]
    assert first["Start Time(us)"] == "1736408883704643.212\t"
    tl = load([path]).timelines[0]
    assert 1736408883704643212 in set(tl.start.tolist())


# --------------------------------------------------------------------------- SQLite


def _db(path):
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


@pytest.mark.parametrize("rel", [DB_L1, DB_L0])
def test_profiler_db_tasks_per_stream(rt, rel):
    """GIVEN a real torch_npu .db export WHEN loaded THEN each stream lane holds the TASK rows of that stream with
    their integer ns times, COMMUNICATION_OP rows are COMM on HCCL group lanes, and ProfilerStep#50 is a STEP."""
    path = rt / rel
    con = _db(path)
    ref = Counter(dict(con.execute("SELECT streamId, count(*) FROM TASK GROUP BY streamId")))
    ref_t = sorted(con.execute("SELECT startNs, endNs - startNs FROM TASK"))
    n_comm_ops = con.execute("SELECT count(*) FROM COMMUNICATION_OP").fetchone()[0]
    rank = con.execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchone()[0]
    con.close()
    tl = load([path]).timelines[0]
    stream = np.array([ln.kind == LaneKind.STREAM for ln in tl.lanes])[tl.lane]
    assert Counter(tl.lanes[i].tid for i in tl.lane[stream]) == ref
    assert sorted(zip(tl.start[stream].tolist(), tl.dur[stream].tolist())) == ref_t
    logical = ~stream & np.array([ln.kind == LaneKind.LOGICAL for ln in tl.lanes])[tl.lane]
    assert int((logical & (tl.kind == Kind.COMM)).sum()) == n_comm_ops
    assert tl.step[tl.kind == Kind.STEP].tolist() == [50]
    assert tl.rank == rank and tl.meta["device_id"] == 0
    assert all(ln.device == "npu:0" for ln in tl.lanes if ln.kind == LaneKind.STREAM)


def test_wal_mode_db_leaves_no_side_files(rt, tmp_path):
    """GIVEN a WAL-mode profiler DB (header bytes 18/19 = 2) in a writable directory
    WHEN it is loaded THEN no -wal / -shm / -journal file appears and the DB bytes are unchanged."""
    src = rt / DB_L1
    head = src.read_bytes()[:20]
    assert head[18] == 2 and head[19] == 2  # the file really is in WAL mode
    dst = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    dst.mkdir(parents=True)
    shutil.copy(src, dst / src.name)
    before = sorted(p.name for p in dst.iterdir())
    data_before = (dst / src.name).read_bytes()
    load([tmp_path])
    assert sorted(p.name for p in dst.iterdir()) == before
    assert (dst / src.name).read_bytes() == data_before


def test_kernel_details_negative_duration_is_clamped_and_said(rt, tmp_path):
    """GIVEN a real kernel_details.csv in which one Duration(us) cell gained a '-' (the bug the fuzz run found)
    WHEN loaded THEN that kernel is kept with duration 0 and one warning says so, as the Chrome reader does;
    every other row is unchanged."""
    src = rt / "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    lines = src.read_text(encoding="utf-8-sig").splitlines(keepends=True)
    assert ",53.741," in lines[1]
    lines[1] = lines[1].replace(",53.741,", ",-53.741,", 1)
    bad = tmp_path / "kernel_details.csv"
    bad.write_text("".join(lines), encoding="utf-8")
    good = load([src]).timelines[0]
    res = load([bad])
    tl = res.timelines[0]
    assert len(tl) == len(good)
    assert (tl.dur >= 0).all()
    expected = good.dur.tolist()
    expected.remove(53741)
    assert sorted(tl.dur.tolist()) == sorted(expected + [0])
    assert sum("1 event(s) with a negative duration set to 0" in w for w in res.warnings) == 1

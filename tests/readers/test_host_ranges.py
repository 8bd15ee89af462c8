"""The overlay's mstx ranges in an msprof DB become its spans, on the streams their launches ran.

Input: the REAL msprof_0.db of msinsight (unified-DB schema, real tasks and
CANN calls) copied to tmp, with FAKE rows added (no Ascend here to record an
overlay run): two draws on a side stream 99, their CANN launches, and the
overlay's mstx ranges around the launches.
"""

from __future__ import annotations

import shutil
import sqlite3

import pytest

import expo_prof
from expo_prof.readers.host_ranges import device_windows
from overlay.contract import SPAN_EXPONENTIAL, SPAN_FORWARD
from shared_paths import REALTRACES

DB = REALTRACES / "msinsight/server/src/test/test_data/full_db/msprof_0.db"
TID = 11814731181473  # the real CANN thread of the file
BIG = (1698220811392354694, 1698220811392966786)  # real ZerosLike task on stream 16, connectionId 0
HIDDEN = (1698220811392400000, 1698220811392500000)  # inside BIG: fully hidden
EXPOSED = (1698220811400000000, 1698220811400050000)  # nothing else runs: fully exposed


def test_device_windows_span_the_tasks_launched_inside_each_range():
    # GIVEN two ranges on thread 1, launches at 10 and 20 (inside the first) and 50 (other thread)
    ranges = [(1, 5, 25, "a"), (1, 30, 40, "b")]
    launches = [(1, 10, 100), (1, 20, 101), (2, 12, 102)]
    tasks = [(100, 1000, 1100, 7), (101, 1050, 1300, 7), (101, 1060, 1070, 8), (102, 900, 950, 7)]
    # WHEN projected THEN one window per range and stream, over its own launches only
    assert device_windows(ranges, launches, tasks) == [(1000, 1300, 7, "a"), (1060, 1070, 8, "a")]


@pytest.fixture
def overlay_db(tmp_path):
    """GIVEN the real msprof DB plus FAKE overlay rows (two draws, their launches and mstx ranges)."""
    assert DB.is_file(), f"missing real trace {DB}"
    path = tmp_path / "msprof_0.db"
    shutil.copyfile(DB, path)
    con = sqlite3.connect(path)
    sid = con.execute("SELECT max(id) FROM STRING_IDS").fetchone()[0] + 1
    con.executemany("INSERT INTO STRING_IDS(id, value) VALUES (?, ?)",
                    [(sid, SPAN_EXPONENTIAL), (sid + 1, SPAN_FORWARD), (sid + 2, "aclnnExponential")])
    ttype, dev = con.execute("SELECT taskType, deviceId FROM TASK WHERE streamId = 16 LIMIT 1").fetchone()
    for i, (st, en) in enumerate((HIDDEN, EXPOSED)):
        cid, host = 900001 + i, 1698220811391950000 + i * 100_000
        con.execute("INSERT INTO TASK(startNs, endNs, deviceId, connectionId, globalPid, taskType, contextId,"
                    " streamId, taskId, modelId, globalTaskId) VALUES (?, ?, ?, ?, 0, ?, 0, 99, ?, 0, ?)",
                    (st, en, dev, cid, ttype, 70000 + i, 990000 + i))
        con.execute("INSERT INTO CANN_API(startNs, endNs, type, globalTid, name, connectionId)"
                    " VALUES (?, ?, 0, ?, ?, ?)", (host, host + 500, TID, sid + 2, cid))
        con.execute("INSERT INTO MSTX_EVENTS(startNs, endNs, eventType, message, globalTid, endGlobalTid)"
                    " VALUES (?, ?, 2, ?, ?, ?)", (host - 100, host + 900, sid, TID, TID))
    # the forward range around the real launch (aclrtGetDeviceCount, connectionId 0) of BIG
    con.execute("INSERT INTO MSTX_EVENTS(startNs, endNs, eventType, message, globalTid, endGlobalTid)"
                " VALUES (?, ?, 2, ?, ?, ?)", (1698220811391886000, 1698220811391890000, sid + 1, TID, TID))
    con.commit()
    con.close()
    return path


def test_mstx_ranges_are_the_overlay_spans_of_an_msprof_db(overlay_db):
    # WHEN expo-prof analyses the DB
    result = expo_prof.analyze(overlay_db)
    inst = result.instances()
    # THEN the instances are the device windows of the two mstx exponential ranges
    ends = (inst["start_ns"] + inst["total_ns"]).tolist()
    assert sorted(zip(inst["start_ns"].tolist(), ends)) == [HIDDEN, EXPOSED]
    # and the draw under the forward's task (same device, another stream) is hidden, the other exposed
    assert sorted(zip(inst["hidden_ns"].tolist(), inst["exposed_ns"].tolist())) == [
        (0, EXPOSED[1] - EXPOSED[0]), (HIDDEN[1] - HIDDEN[0], 0)]
    # and the forward is the device window of the mstx forward range: the task its launch started
    assert result.ranks()["forward_ns"].tolist() == [BIG[1] - BIG[0]]


def test_without_the_device_projection_the_ranges_are_not_found(overlay_db, monkeypatch):
    # GIVEN the same DB WHEN the reader does not project the ranges onto the streams
    from expo_prof.errors import NothingFound
    from expo_prof.readers.ascend import profiler_db

    monkeypatch.setattr(profiler_db, "device_windows", lambda *a: [])
    # THEN host ranges alone are not instances on a trace with device work (the projection is what finds them)
    with pytest.raises(NothingFound):
        expo_prof.analyze(overlay_db)

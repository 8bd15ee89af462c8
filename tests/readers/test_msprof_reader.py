"""msprof CLI outputs: op_summary_*.csv and msprof_*.db on real files; msprof_*.json and task_time_*.csv
(no real sample exists, see PROVENANCE.md) in a PROF_* layout rebuilt from real events."""

from __future__ import annotations

import csv
import json
import sqlite3
from collections import Counter

import numpy as np
from readers_helpers import us_to_ns

from expo_prof.readers import load
from expo_prof.timeline import Kind, LaneKind

OP_SUMMARY = "msinsight/server/src/test/test_data/test_kernel_parse/op_summary_1.csv"
SAME_ROWS_KD = "msinsight/server/src/test/test_data/test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
MSPROF_DB = "msinsight/server/src/test/test_data/full_db/msprof_0.db"
TRACE_VIEW = "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"


def test_op_summary_matches_kernel_details_of_the_same_rows(rt):
    """GIVEN the real op_summary_1.csv (msprof column names: Op Name / OP Type / Task Type / Task Duration(us))
    and the kernel_details.csv holding the same rows under torch_npu names
    WHEN both are loaded THEN they give the same (start, dur, name, kind, lane name) events."""
    a = load([rt / OP_SUMMARY]).timelines[0]
    b = load([rt / SAME_ROWS_KD]).timelines[0]
    assert a.fmt == "msprof-op-summary" and b.fmt == "ascend-kernel-csv"

    def rows(tl):
        return sorted(zip(tl.start.tolist(), tl.dur.tolist(), [tl.names[i] for i in tl.name], tl.kind.tolist(),
                          [tl.lanes[i].name for i in tl.lane]))

    assert rows(a) == rows(b) and len(a) == 21
    # Two AI_CPU + two DSA_SQE tasks on side stream 17 beside compute stream 16.
    assert Counter(a.lanes[i].name for i in a.lane) == Counter({"Stream 16": 13, "Stream 17": 4, "HCCL communication": 4})


def test_msprof_db_tasks_and_mstx_ranges(rt):
    """GIVEN the real msprof_0.db WHEN loaded THEN TASK rows per stream and MSTX ranges (annotations) match SQL counts."""
    path = rt / MSPROF_DB
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    ref = Counter(dict(con.execute("SELECT streamId, count(*) FROM TASK GROUP BY streamId")))
    n_mstx = con.execute("SELECT count(*) FROM MSTX_EVENTS").fetchone()[0]
    n_cann = con.execute("SELECT count(*) FROM CANN_API").fetchone()[0]
    con.close()
    tl = load([path]).timelines[0]
    assert tl.fmt == "msprof-db"
    stream = np.array([ln.kind == LaneKind.STREAM for ln in tl.lanes])[tl.lane]
    assert Counter(tl.lanes[i].tid for i in tl.lane[stream]) == ref
    assert int((tl.kind == Kind.ANNOTATION).sum()) == n_mstx
    assert int((tl.kind == Kind.RUNTIME).sum()) == n_cann


def _prof_dir(tmp_path, name="PROF_000001_20250101000000000_ABC"):
    out = tmp_path / name / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    return out


def test_msprof_json_slices_are_merged(rt, tmp_path):
    """GIVEN a PROF_*/mindstudio_profiler_output with the real Ascend timeline split into two msprof slice files
    (msprof_*.json uses the same Chrome format as trace_view.json)
    WHEN the PROF directory is loaded THEN one merged Timeline holds exactly the events of the unsplit file."""
    events = json.loads((rt / TRACE_VIEW).read_bytes())
    meta = [e for e in events if e.get("ph") == "M"]
    rest = [e for e in events if e.get("ph") != "M"]
    half = len(rest) // 2
    out = _prof_dir(tmp_path)
    (out / "msprof_slice_0_20250101.json").write_text(json.dumps(meta + rest[:half]))
    (out / "msprof_slice_1_20250101.json").write_text(json.dumps(meta + rest[half:]))
    whole = load([rt / TRACE_VIEW]).timelines[0]
    res = load([tmp_path])
    assert len(res.timelines) == 1
    tl = res.timelines[0]
    assert tl.fmt == "msprof" and len(tl.meta["merged_from"]) == 2
    key = lambda t: sorted(zip(t.start.tolist(), t.dur.tolist(), [t.names[i] for i in t.name],  # noqa: E731
                               [t.lanes[i].name for i in t.lane]))
    assert key(tl) == key(whole)


def test_msprof_task_time_csv(rt, tmp_path):
    """GIVEN a task_time_*.csv (msprof header: Device_id, kernel_name, kernel_type, stream_id, task_id,
    task_time(us), task_start(us), task_stop(us)) holding the real rows of op_summary_1.csv
    WHEN loaded THEN each row is a task on its stream with the exact start and duration."""
    with open(rt / OP_SUMMARY, newline="") as f:
        src = list(csv.DictReader(f))
    out = _prof_dir(tmp_path)
    p = out / "task_time_0_1_1.csv"
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Device_id", "kernel_name", "kernel_type", "stream_id", "task_id", "task_time(us)",
                    "task_start(us)", "task_stop(us)"])
        for r in src:
            w.writerow([0, r["Op Name"], r["Task Type"], r["Stream ID"], r["Task ID"], r["Task Duration(us)"],
                        r["Start Time(us)"], ""])
    tl = load([p]).timelines[0]
    assert tl.fmt == "msprof-task-time" and tl.meta["device_id"] == 0
    assert sorted(tl.start.tolist()) == sorted(us_to_ns(r["Start Time(us)"]) for r in src)
    assert sorted(tl.dur.tolist()) == sorted(us_to_ns(r["Task Duration(us)"]) for r in src)
    assert Counter(tl.lanes[i].name for i in tl.lane)["Stream 17"] == 4

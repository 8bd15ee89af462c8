"""SQLite profiler outputs: torch_npu ``ascend_pytorch_profiler_*.db`` and msprof ``msprof_*.db``.

Both share the MindStudio "unified DB" schema: ``TASK`` (device tasks,
``startNs``/``endNs`` integer ns, ``streamId``, ``globalTaskId``), names in
``COMPUTE_TASK_INFO`` / ``COMMUNICATION_TASK_INFO`` as ids into
``STRING_IDS``, host ranges in ``PYTORCH_API`` (torch_npu) / ``CANN_API`` /
``MSTX_EVENTS``, communication ops in ``COMMUNICATION_OP``. Times are
already integer ns, so nothing is lost.

The file is opened read-only *and* immutable
(:mod:`expo_prof.readers.sqlite_readonly`): some of these databases are in WAL
mode, and even a read-only open would otherwise create ``-wal``/``-shm`` files
next to the user's data.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from expo_prof.errors import BadInput
from expo_prof.readers.builder import LaneTable, build_timeline, step_number
from expo_prof.readers.host_ranges import OVERLAY_SPANS, device_windows
from expo_prof.readers.kinds import ascend_task_kind
from expo_prof.readers.sqlite_readonly import reading, text_cells
from expo_prof.timeline import Interner, Kind, Lane, LaneKind, Timeline

# TASK.taskType strings (db flavour) that are not in the trace_view table.
_DB_TASK_KIND = {
    "EVENT_RECORD": Kind.OTHER,
    "EVENT_WAIT": Kind.OTHER,
    "PROFILING_ENABLE": Kind.OTHER,
    "PROFILING_DISABLE": Kind.OTHER,
    "STARS_COMMON": Kind.OTHER,
    "MODEL_EXECUTE": Kind.OTHER,
}
# PYTORCH_API.type: ENUM_API_TYPE ids. 50003 "trace" = Python frames (dropped like python_function).
_API_TRACE = 50003
_API_MSTX = 50004


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


def read_profiler_db(path: Path, *, fmt: str, rank_hint: int | None, max_bytes: int | None = None) -> Timeline:
    """Read device tasks, host ops and communication ops of a profiler DB into a Timeline."""
    with reading(path, max_bytes) as con:
        return _read(con, path, str(path), fmt, rank_hint)


def _read(con: sqlite3.Connection, path: Path, where: str, fmt: str, rank_hint: int | None) -> Timeline:
    tables = _tables(con)
    if "TASK" not in tables:
        raise BadInput(f"{where}: no TASK table (not a torch_npu/msprof profiler DB)")
    warnings: list[str] = []
    strings: dict[Any, str] = {}
    if "STRING_IDS" in tables:
        strings, odd = text_cells(con.execute("SELECT id, value FROM STRING_IDS"))
        if odd:
            warnings.append(f"{where}: {odd} STRING_IDS value(s) not stored as text (BLOB or number) read as text")

    def s(i: Any) -> str:
        if i is None:
            return ""
        v = strings.get(i)
        return v if v is not None else str(i)

    names = Interner()
    lanes = LaneTable()
    start: list[int] = []
    end: list[int] = []
    lane: list[int] = []
    name: list[int] = []
    kind: list[int] = []
    step: list[int] = []

    # ---- device tasks
    compute: dict[int, tuple[Any, Any]] = {}
    if "COMPUTE_TASK_INFO" in tables:
        compute = {g: (n, t) for n, g, t in con.execute("SELECT name, globalTaskId, taskType FROM COMPUTE_TASK_INFO")}
    comm: dict[int, tuple[Any, Any]] = {}
    if "COMMUNICATION_TASK_INFO" in tables:
        cols = _columns(con, "COMMUNICATION_TASK_INFO")
        tt = "taskType" if "taskType" in cols else "name"
        comm = {g: (n, t) for n, g, t in con.execute(f"SELECT name, globalTaskId, {tt} FROM COMMUNICATION_TASK_INFO")}
    task_cols = _columns(con, "TASK")
    gid = "globalTaskId" if "globalTaskId" in task_cols else "NULL"
    conn = "connectionId" if "connectionId" in task_cols else "NULL"
    # HCCL tasks that COMMUNICATION_TASK_INFO does not list: the op-level task
    # msprof puts on the communication stream (task type AI_CORE, spanning the
    # whole hcom_* op) shares the op's connectionId in COMMUNICATION_OP; and
    # any kernel-typed task on a stream that carries HCCL tasks is HCCL's.
    comm_conn: set[int] = set()
    if "COMMUNICATION_OP" in tables and "connectionId" in _columns(con, "COMMUNICATION_OP"):
        comm_conn = {c for (c,) in con.execute("SELECT connectionId FROM COMMUNICATION_OP") if isinstance(c, int)}
    comm_streams: set[Any] = set()
    if comm and gid != "NULL":
        comm_streams = {r for (r,) in con.execute(
            "SELECT DISTINCT streamId FROM TASK WHERE globalTaskId IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)")}
    devices: set[int] = set()
    kind_cache: dict[str, Kind] = {}
    bad = 0
    no_info = 0
    # For the overlay's mstx ranges (host_ranges): tasks, CANN launches, ranges.
    task_conn: list[tuple[int, int, int, int]] = []
    launches: list[tuple[int, int, int]] = []
    overlay_ranges: list[tuple[int, int, int, str]] = []
    for st, en, dev, stream, ttype, g, cid in con.execute(
        f"SELECT startNs, endNs, deviceId, streamId, taskType, {gid}, {conn} FROM TASK"
    ):
        if not isinstance(st, int) or not isinstance(en, int) or en < st:
            bad += 1
            continue
        tstr = s(ttype)
        if g in compute:
            n_id, ctype = compute[g]
            nm = s(n_id)
            ctype_s = s(ctype)
            k = ascend_task_kind(ctype_s) if ctype_s not in ("", "N/A") else Kind.KERNEL
        elif g in comm:
            _op, ctt = comm[g]
            nm = tstr or s(ctt)  # the task kind ("Notify Wait", "SDMA"), as trace_view.json names them
            k = Kind.COMM
        else:
            nm = tstr
            cached = kind_cache.get(tstr)
            if cached is None:
                cached = kind_cache[tstr] = _DB_TASK_KIND.get(tstr, ascend_task_kind(tstr))
            k = cached
            if k == Kind.KERNEL:
                if cid in comm_conn or stream in comm_streams:
                    k = Kind.COMM
                elif compute:
                    # A kernel-typed task with no operator in COMPUTE_TASK_INFO (launched
                    # without an op): msprof leaves it out of "computing" and torch_npu
                    # out of trace_view.json; so is it here.
                    k = Kind.OTHER
                    no_info += 1
        if isinstance(dev, int):
            devices.add(dev)
        li = lanes.get(("stream", dev, stream), lambda d=dev, sid=stream: Lane(
            LaneKind.STREAM, f"npu:{d}" if isinstance(d, int) else "npu", f"Stream {sid}", 0,
            sid if isinstance(sid, int) else -1))
        if isinstance(cid, int):
            task_conn.append((cid, st, en, li))
        start.append(st)
        end.append(en)
        lane.append(li)
        name.append(names(nm))
        kind.append(k)
        step.append(-1)
    n_tasks = len(start)

    # ---- communication ops (op-level windows per group)
    if "COMMUNICATION_OP" in tables:
        cols = _columns(con, "COMMUNICATION_OP")
        grp = "groupName" if "groupName" in cols else "NULL"
        for op, st, en, g in con.execute(f"SELECT opName, startNs, endNs, {grp} FROM COMMUNICATION_OP"):
            if not isinstance(st, int) or not isinstance(en, int) or en < st:
                bad += 1
                continue
            gname = s(g)
            li = lanes.get(("hccl", gname), lambda gn=gname: Lane(LaneKind.LOGICAL, "npu", f"HCCL group {gn}".strip()))
            start.append(st)
            end.append(en)
            lane.append(li)
            name.append(names(s(op)))
            kind.append(Kind.COMM)
            step.append(-1)

    # ---- host: PyTorch ops (torch_npu), CANN API, MSTX ranges
    dropped_py = 0
    if "PYTORCH_API" in tables:
        cols = _columns(con, "PYTORCH_API")
        typ = "type" if "type" in cols else "NULL"
        for st, en, tid, n_id, t in con.execute(f"SELECT startNs, endNs, globalTid, name, {typ} FROM PYTORCH_API"):
            if t == _API_TRACE:
                dropped_py += 1
                continue
            st_i, en_i = _as_int(st), _as_int(en)
            if st_i is None or en_i is None or en_i < st_i:
                bad += 1
                continue
            li = _host_lane(lanes, tid, "")
            nm = s(n_id)
            k = Kind.ANNOTATION if t == _API_MSTX else Kind.CPU_OP
            sn = -1
            if nm.startswith("ProfilerStep#"):
                k, sn = Kind.STEP, step_number(nm)
            start.append(st_i)
            end.append(en_i)
            lane.append(li)
            name.append(names(nm))
            kind.append(k)
            step.append(sn)
    # Host-side tables: same columns, different lane prefix and kind.
    for table, text_col, prefix, host_kind in (
        ("CANN_API", "name", "CANN ", Kind.RUNTIME),
        ("MSTX_EVENTS", "message", "", Kind.ANNOTATION),
    ):
        if table not in tables:
            continue
        cid_col = "connectionId" if "connectionId" in _columns(con, table) else "NULL"
        for st, en, tid, text, cid in con.execute(
            f"SELECT startNs, endNs, globalTid, {text_col}, {cid_col} FROM {table}"
        ):
            st_i, en_i = _as_int(st), _as_int(en)
            if st_i is None or en_i is None or en_i < st_i:
                bad += 1
                continue
            text_s = s(text)
            if table == "CANN_API" and isinstance(cid, int) and isinstance(tid, int):
                launches.append((tid, st_i, cid))
            elif table == "MSTX_EVENTS" and text_s in OVERLAY_SPANS and isinstance(tid, int):
                overlay_ranges.append((tid, st_i, en_i, text_s))
            start.append(st_i)
            end.append(en_i)
            lane.append(_host_lane(lanes, tid, prefix))
            name.append(names(text_s))
            kind.append(host_kind)
            step.append(-1)
    # The overlay's mstx ranges also on the device streams their launches ran on,
    # as a torch trace's gpu_user_annotation (the analysis reads those).
    for st_i, en_i, li, nm in device_windows(overlay_ranges, launches, task_conn):
        start.append(st_i)
        end.append(en_i)
        lane.append(li)
        name.append(names(nm))
        kind.append(Kind.ANNOTATION)
        step.append(-1)
    if bad:
        warnings.append(f"{where}: {bad} row(s) with missing or reversed start/end skipped")
    if not start:
        raise BadInput(f"{where}: profiler DB holds no timed rows (TASK is empty)")
    if n_tasks == 0:
        warnings.append(f"{where}: TASK table is empty: no device activity, host ranges only")

    meta: dict[str, Any] = {"dropped_events": {"python frames": dropped_py} if dropped_py else {}}
    if no_info:
        meta["kernel_tasks_without_op_info"] = no_info
    rank = rank_hint
    if "RANK_DEVICE_MAP" in tables:
        rows = con.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall()
        if len(rows) == 1 and isinstance(rows[0][0], int) and rows[0][0] >= 0:
            rank = rows[0][0]
            if isinstance(rows[0][1], int):
                meta["device_id"] = rows[0][1]
    if "device_id" not in meta and len(devices) == 1:
        meta["device_id"] = next(iter(devices))
    if "STEP_TIME" in tables:
        rows = con.execute("SELECT id, startNs, endNs FROM STEP_TIME").fetchall()
        meta["step_time"] = {
            "step": np.array([_as_int(r[0]) or -1 for r in rows], dtype=np.int64),
            "start_ns": np.array([_as_int(r[1]) or 0 for r in rows], dtype=np.int64),
            "end_ns": np.array([_as_int(r[2]) or 0 for r in rows], dtype=np.int64),
        }
    if "NPU_INFO" in tables:
        meta["devices"] = [str(r[1]) for r in con.execute("SELECT id, name FROM NPU_INFO")]
    if "META_DATA" in tables:
        meta["db_meta"] = {str(k): str(v) for k, v in con.execute("SELECT name, value FROM META_DATA")
                           if k != "ENV_VARIABLES"}
    st_a = np.array(start, dtype=np.int64)
    return build_timeline(
        rank=rank if rank is not None else 0,
        source=where,
        fmt=fmt,
        backend="npu",
        lanes=lanes.lanes,
        names=names,
        start=st_a,
        dur=np.array(end, dtype=np.int64) - st_a,
        lane=lane,
        name=name,
        kind=kind,
        step=step,
        meta=meta,
        warnings=warnings,
    )


def _as_int(v: Any) -> int | None:
    """DB times are INTEGER, but torch_npu stores PYTORCH_API times as TEXT."""
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        v = v.strip()
        if v.isdigit():
            return int(v)
    return None


def _host_lane(lanes: LaneTable, global_tid: Any, prefix: str) -> int:
    # globalTid packs the process id in the high 32 bits and the thread id in the low 32.
    if isinstance(global_tid, int):
        pid, tid = global_tid >> 32, global_tid & 0xFFFFFFFF
    else:
        pid, tid = 0, -1
    return lanes.get((prefix, pid, tid), lambda: Lane(LaneKind.THREAD, "cpu", f"{prefix}Thread {tid}", pid, tid))

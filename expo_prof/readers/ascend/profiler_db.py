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
    """The Timeline of an open profiler DB: device tasks (:func:`_device_tasks`), communication ops
    (:func:`_comm_ops`), host ranges (:func:`_pytorch_api`, :func:`_host_tables`), the overlay's mstx ranges on
    the device streams, and the DB's own facts in ``meta`` (:func:`_meta`)."""
    tables = _tables(con)
    if "TASK" not in tables:
        raise BadInput(f"{where}: no TASK table (not a torch_npu/msprof profiler DB)")
    db = _Db(con, tables, where)
    rows = _Rows()
    tasks = _device_tasks(db, rows)
    n_tasks = len(rows.start)
    _comm_ops(db, rows)
    dropped_py = _pytorch_api(db, rows)
    _host_tables(db, rows, tasks)
    # The overlay's mstx ranges also on the device streams their launches ran on,
    # as a torch trace's gpu_user_annotation (the analysis reads those).
    for st_i, en_i, li, nm in device_windows(tasks.overlay_ranges, tasks.launches, tasks.task_conn):
        rows.add(st_i, en_i, li, nm, Kind.ANNOTATION)
    warnings = db.warnings
    if rows.bad:
        warnings.append(f"{where}: {rows.bad} row(s) with missing or reversed start/end skipped")
    if not rows.start:
        raise BadInput(f"{where}: profiler DB holds no timed rows (TASK is empty)")
    if n_tasks == 0:
        warnings.append(f"{where}: TASK table is empty: no device activity, host ranges only")
    meta, rank = _meta(db, tasks, dropped_py, rank_hint)
    st_a = np.array(rows.start, dtype=np.int64)
    return build_timeline(
        rank=rank if rank is not None else 0,
        source=where,
        fmt=fmt,
        backend="npu",
        lanes=rows.lanes.lanes,
        names=rows.names,
        start=st_a,
        dur=np.array(rows.end, dtype=np.int64) - st_a,
        lane=rows.lane,
        name=rows.name,
        kind=rows.kind,
        step=rows.step,
        meta=meta,
        warnings=warnings,
    )


class _Db:
    """An open profiler DB: its tables, its ``STRING_IDS`` (:meth:`s`), and the warnings of the reading."""

    def __init__(self, con: sqlite3.Connection, tables: set[str], where: str) -> None:
        self.con, self.tables, self.where = con, tables, where
        self.warnings: list[str] = []
        self.strings: dict[Any, str] = {}
        if "STRING_IDS" in tables:
            self.strings, odd = text_cells(con.execute("SELECT id, value FROM STRING_IDS"))
            if odd:
                self.warnings.append(f"{where}: {odd} STRING_IDS value(s) not stored as text (BLOB or number) read "
                                     "as text")

    def s(self, i: Any) -> str:
        """The string of the id ``i`` ("" for NULL; the id itself as text when STRING_IDS lacks it)."""
        if i is None:
            return ""
        v = self.strings.get(i)
        return v if v is not None else str(i)

    def columns(self, table: str) -> set[str]:
        return _columns(self.con, table)


class _Rows:
    """The Timeline's rows as they are read (one list per column), its lanes and names, and the rows skipped for
    a missing or reversed start/end."""

    def __init__(self) -> None:
        self.names = Interner()
        self.lanes = LaneTable()
        self.start: list[int] = []
        self.end: list[int] = []
        self.lane: list[int] = []
        self.name: list[int] = []
        self.kind: list[int] = []
        self.step: list[int] = []
        self.bad = 0

    def add(self, st: int, en: int, li: int, nm: str, k: int, sn: int = -1) -> None:
        self.start.append(st)
        self.end.append(en)
        self.lane.append(li)
        self.name.append(self.names(nm))
        self.kind.append(k)
        self.step.append(sn)


class _Tasks:
    """What the device tasks leave for later: the devices seen, the kernel-typed tasks without an operator, and
    for the overlay's mstx ranges (:func:`~expo_prof.readers.host_ranges.device_windows`) the tasks by
    connection id, the CANN launches and the ranges."""

    def __init__(self) -> None:
        self.devices: set[int] = set()
        self.no_info = 0
        self.task_conn: list[tuple[int, int, int, int]] = []
        self.launches: list[tuple[int, int, int]] = []
        self.overlay_ranges: list[tuple[int, int, int, str]] = []


class _TaskInfo:
    """What tells a device task's name and kind: the operator tables by ``globalTaskId``, and what marks a
    kernel-typed task as HCCL's."""

    def __init__(self, db: _Db) -> None:
        con, tables = db.con, db.tables
        self.compute: dict[int, tuple[Any, Any]] = {}
        if "COMPUTE_TASK_INFO" in tables:
            self.compute = {g: (n, t) for n, g, t in con.execute(
                "SELECT name, globalTaskId, taskType FROM COMPUTE_TASK_INFO")}
        self.comm: dict[int, tuple[Any, Any]] = {}
        if "COMMUNICATION_TASK_INFO" in tables:
            tt = "taskType" if "taskType" in db.columns("COMMUNICATION_TASK_INFO") else "name"
            self.comm = {g: (n, t) for n, g, t in con.execute(
                f"SELECT name, globalTaskId, {tt} FROM COMMUNICATION_TASK_INFO")}
        task_cols = db.columns("TASK")
        self.gid = "globalTaskId" if "globalTaskId" in task_cols else "NULL"
        self.conn = "connectionId" if "connectionId" in task_cols else "NULL"
        # HCCL tasks that COMMUNICATION_TASK_INFO does not list: the op-level task
        # msprof puts on the communication stream (task type AI_CORE, spanning the
        # whole hcom_* op) shares the op's connectionId in COMMUNICATION_OP; and
        # any kernel-typed task on a stream that carries HCCL tasks is HCCL's.
        self.comm_conn: set[int] = set()
        if "COMMUNICATION_OP" in tables and "connectionId" in db.columns("COMMUNICATION_OP"):
            self.comm_conn = {c for (c,) in con.execute("SELECT connectionId FROM COMMUNICATION_OP")
                              if isinstance(c, int)}
        self.comm_streams: set[Any] = set()
        if self.comm and self.gid != "NULL":
            self.comm_streams = {r for (r,) in con.execute(
                "SELECT DISTINCT streamId FROM TASK WHERE globalTaskId IN "
                "(SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)")}
        self.kind_cache: dict[str, Kind] = {}
        #: Kernel-typed tasks with no operator in COMPUTE_TASK_INFO (kept as Kind.OTHER).
        self.no_info = 0

    def name_kind(self, db: _Db, ttype: Any, g: Any, cid: Any, stream: Any) -> tuple[str, Kind]:
        """A task's name and kind: its operator's (COMPUTE_TASK_INFO), a communication task's kind, else its own
        task type."""
        tstr = db.s(ttype)
        if g in self.compute:
            n_id, ctype = self.compute[g]
            ctype_s = db.s(ctype)
            return db.s(n_id), ascend_task_kind(ctype_s) if ctype_s not in ("", "N/A") else Kind.KERNEL
        if g in self.comm:
            _op, ctt = self.comm[g]
            return tstr or db.s(ctt), Kind.COMM  # the task kind ("Notify Wait", "SDMA"), as trace_view.json names them
        k = self.kind_cache.get(tstr)
        if k is None:
            k = self.kind_cache[tstr] = _DB_TASK_KIND.get(tstr, ascend_task_kind(tstr))
        if k == Kind.KERNEL:
            if cid in self.comm_conn or stream in self.comm_streams:
                k = Kind.COMM
            elif self.compute:
                # A kernel-typed task with no operator in COMPUTE_TASK_INFO (launched
                # without an op): msprof leaves it out of "computing" and torch_npu
                # out of trace_view.json; so is it here.
                k = Kind.OTHER
                self.no_info += 1
        return tstr, k


def _device_tasks(db: _Db, rows: _Rows) -> _Tasks:
    """The TASK table's rows, one per device task, on a lane per (device, stream)."""
    info = _TaskInfo(db)
    tasks = _Tasks()
    for st, en, dev, stream, ttype, g, cid in db.con.execute(
        f"SELECT startNs, endNs, deviceId, streamId, taskType, {info.gid}, {info.conn} FROM TASK"
    ):
        if not isinstance(st, int) or not isinstance(en, int) or en < st:
            rows.bad += 1
            continue
        nm, k = info.name_kind(db, ttype, g, cid, stream)
        if isinstance(dev, int):
            tasks.devices.add(dev)
        li = rows.lanes.get(("stream", dev, stream), lambda d=dev, sid=stream: Lane(
            LaneKind.STREAM, f"npu:{d}" if isinstance(d, int) else "npu", f"Stream {sid}", 0,
            sid if isinstance(sid, int) else -1))
        if isinstance(cid, int):
            tasks.task_conn.append((cid, st, en, li))
        rows.add(st, en, li, nm, k)
    tasks.no_info = info.no_info
    return tasks


def _comm_ops(db: _Db, rows: _Rows) -> None:
    """COMMUNICATION_OP: op-level windows, on a lane per communication group."""
    if "COMMUNICATION_OP" not in db.tables:
        return
    grp = "groupName" if "groupName" in db.columns("COMMUNICATION_OP") else "NULL"
    for op, st, en, g in db.con.execute(f"SELECT opName, startNs, endNs, {grp} FROM COMMUNICATION_OP"):
        if not isinstance(st, int) or not isinstance(en, int) or en < st:
            rows.bad += 1
            continue
        gname = db.s(g)
        li = rows.lanes.get(("hccl", gname), lambda gn=gname: Lane(LaneKind.LOGICAL, "npu", f"HCCL group {gn}".strip()))
        rows.add(st, en, li, db.s(op), Kind.COMM)


def _pytorch_api(db: _Db, rows: _Rows) -> int:
    """PYTORCH_API (torch_npu): host ops, mstx ranges and steps on their threads' lanes; Python frames are
    dropped (as python_function is): their number is returned."""
    if "PYTORCH_API" not in db.tables:
        return 0
    dropped_py = 0
    typ = "type" if "type" in db.columns("PYTORCH_API") else "NULL"
    for st, en, tid, n_id, t in db.con.execute(f"SELECT startNs, endNs, globalTid, name, {typ} FROM PYTORCH_API"):
        if t == _API_TRACE:
            dropped_py += 1
            continue
        st_i, en_i = _as_int(st), _as_int(en)
        if st_i is None or en_i is None or en_i < st_i:
            rows.bad += 1
            continue
        li = _host_lane(rows.lanes, tid, "")
        nm = db.s(n_id)
        k = Kind.ANNOTATION if t == _API_MSTX else Kind.CPU_OP
        sn = -1
        if nm.startswith("ProfilerStep#"):
            k, sn = Kind.STEP, step_number(nm)
        rows.add(st_i, en_i, li, nm, k, sn)
    return dropped_py


def _host_tables(db: _Db, rows: _Rows, tasks: _Tasks) -> None:
    """CANN_API and MSTX_EVENTS: host-side tables of the same columns, with their lane prefix and kind; the CANN
    launches and the overlay's mstx ranges are kept in ``tasks`` for the device windows."""
    for table, text_col, prefix, host_kind in (
        ("CANN_API", "name", "CANN ", Kind.RUNTIME),
        ("MSTX_EVENTS", "message", "", Kind.ANNOTATION),
    ):
        if table not in db.tables:
            continue
        cid_col = "connectionId" if "connectionId" in db.columns(table) else "NULL"
        for st, en, tid, text, cid in db.con.execute(
            f"SELECT startNs, endNs, globalTid, {text_col}, {cid_col} FROM {table}"
        ):
            st_i, en_i = _as_int(st), _as_int(en)
            if st_i is None or en_i is None or en_i < st_i:
                rows.bad += 1
                continue
            text_s = db.s(text)
            if table == "CANN_API" and isinstance(cid, int) and isinstance(tid, int):
                tasks.launches.append((tid, st_i, cid))
            elif table == "MSTX_EVENTS" and text_s in OVERLAY_SPANS and isinstance(tid, int):
                tasks.overlay_ranges.append((tid, st_i, en_i, text_s))
            rows.add(st_i, en_i, _host_lane(rows.lanes, tid, prefix), text_s, host_kind)


def _meta(db: _Db, tasks: _Tasks, dropped_py: int, rank_hint: int | None) -> tuple[dict[str, Any], int | None]:
    """The Timeline's ``meta`` (what was dropped, the device id, STEP_TIME, NPU_INFO, META_DATA) and its rank:
    RANK_DEVICE_MAP's when it holds one rank, else ``rank_hint``."""
    con, tables = db.con, db.tables
    meta: dict[str, Any] = {"dropped_events": {"python frames": dropped_py} if dropped_py else {}}
    if tasks.no_info:
        meta["kernel_tasks_without_op_info"] = tasks.no_info
    rank = rank_hint
    if "RANK_DEVICE_MAP" in tables:
        rows = con.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall()
        if len(rows) == 1 and isinstance(rows[0][0], int) and rows[0][0] >= 0:
            rank = rows[0][0]
            if isinstance(rows[0][1], int):
                meta["device_id"] = rows[0][1]
    if "device_id" not in meta and len(tasks.devices) == 1:
        meta["device_id"] = next(iter(tasks.devices))
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
    return meta, rank


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

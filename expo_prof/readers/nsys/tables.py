"""Nsight Systems SQLite export (``nsys export --type sqlite``) → Timeline(s).

NVIDIA's documented schema ("Exporter SQLite Schema", docs/trace-formats.md
cites the releases followed), stable in the parts read here from 2022 on:

* ``CUPTI_ACTIVITY_KIND_KERNEL`` / ``_MEMCPY`` / ``_MEMSET`` /
  ``_SYNCHRONIZATION``: device activity with ``start``/``end`` (integer ns),
  ``deviceId``, ``streamId``, ``correlationId``, ``globalPid``; kernel names
  are ids into ``StringIds`` (``demangledName`` — the full name torch's
  kernels are recognised by —, else ``shortName`` / ``mangledName``).
* ``CUPTI_ACTIVITY_KIND_RUNTIME``: CUDA runtime calls on host threads
  (``globalTid``, ``nameId``), sharing ``correlationId`` with what they launched.
* ``NVTX_EVENTS``: push/pop (59) and start/end (60) ranges, named by ``text``
  or by ``textId`` into ``StringIds``; ``ENUM_NSYS_EVENT_TYPE`` names the ids
  where the export has it.
* ``TARGET_INFO_CUDA_STREAM``, ``TARGET_INFO_GPU``, ``ThreadNames``,
  ``TARGET_INFO_SESSION_START_TIME`` and the version table
  (``EXPORT_META_DATA`` up to 2022, ``META_DATA_EXPORT`` after).

Tables are created lazily: a missing table (or column) means no such events,
never an error. ``globalTid`` / ``globalPid`` pack the process id in bits 24–47
and the thread id in bits 0–23 (NVIDIA: ``globalTid / 0x1000000 % 0x1000000``).
Times stay the export's own integer ns (relative to the session start; its UTC
epoch is ``meta["utc_epoch_ns"]``): never a float.

A report of several processes with GPU work (vLLM's tensor-parallel workers)
becomes one Timeline per process through ``meta["rank_pids"]``
(:func:`~expo_prof.readers.builder.split_ranks`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from expo_prof.errors import BadInput
from expo_prof.readers.builder import LaneTable, build_timeline
from expo_prof.readers.host_ranges import OVERLAY_SPANS, launched_windows
from expo_prof.readers.kinds import NSYS_TABLE_KIND, is_comm_kernel
from expo_prof.readers.nsys.meta import (
    export_meta,
    gpu_names,
    rank_pids,
    stream_info,
    thread_names,
)
from expo_prof.readers.sqlite_readonly import reading
from expo_prof.timeline import Interner, Kind, Lane, LaneKind, Timeline

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
STRINGS = "StringIds"
#: Tables only an nsys export has; any one of them beside ``StringIds`` identifies the file.
MARKERS = (KERNEL, MEMCPY, MEMSET, SYNC, RUNTIME, NVTX, "EXPORT_META_DATA", "META_DATA_EXPORT",
           "TARGET_INFO_SESSION_START_TIME", "TARGET_INFO_CUDA_STREAM")
#: NVTX event types of ranges (NvtxPushPopRange, NvtxStartEndRange) when the export has no ENUM_NSYS_EVENT_TYPE.
NVTX_RANGE_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60}
#: CUpti_ActivityMemcpyKind → the names Kineto gives copies.
MEMCPY_KIND = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
               10: "PtoP"}
#: CUpti_ActivitySynchronizationType → Kineto's cuda_sync names.
SYNC_KIND = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}

# A row is kept when start and end are integers, end >= start, and end - start does not overflow
# (SQLite turns an overflowing integer subtraction into a REAL).
_VALID = """typeof(start) = 'integer' AND typeof("end") = 'integer' AND typeof("end" - start) = 'integer'
            AND "end" >= start"""


def is_nsys_export(tables: set[str]) -> bool:
    """Whether a SQLite file with these tables is an nsys export."""
    return STRINGS in tables and any(t in tables for t in MARKERS)


def _int(cols: set[str], name: str, default: int = -1) -> str:
    """SQL for an integer column: its value when it is an integer, else ``default`` (NULL, text, missing)."""
    if name not in cols:
        return str(default)
    return f"""CASE WHEN typeof("{name}") = 'integer' THEN "{name}" ELSE {default} END"""


class _Db:
    """The open export: its tables, their columns, the string table."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        self._cols: dict[str, set[str]] = {}
        self.strings: dict[int, str] = {}
        if STRINGS in self.tables and {"id", "value"} <= self.cols(STRINGS):
            self.strings = {i: v for i, v in con.execute(f"SELECT id, value FROM {STRINGS}")
                            if isinstance(i, int) and isinstance(v, str)}

    def cols(self, table: str) -> set[str]:
        if table not in self._cols:
            self._cols[table] = {r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")')}
        return self._cols[table]

    def timed(self, table: str, select: str, where: str = "") -> tuple[np.ndarray | None, int]:
        """Integer rows ``start, end, <select>`` of a table (None when absent or empty) and the rows dropped."""
        if table not in self.tables or not {"start", "end"} <= self.cols(table):
            return None, 0
        total = self.con.execute(f"SELECT count(*) FROM {table}{' WHERE ' + where if where else ''}").fetchone()[0]
        cond = _VALID + (f" AND {where}" if where else "")
        rows = self.con.execute(f'SELECT start, "end", {select} FROM {table} WHERE {cond}').fetchall()
        arr = np.array(rows, dtype=np.int64).reshape(len(rows), -1) if rows else None
        return arr, total - len(rows)

    def string(self, i: int, default: str) -> str:
        return self.strings.get(i, default)


def read_nsys_export(path: Path, *, max_bytes: int | None = None, source: str | None = None) -> Timeline:
    """Read an nsys SQLite export into one Timeline (``meta["rank_pids"]`` splits it per GPU process)."""
    with reading(path, max_bytes) as con:
        db = _Db(con)
        if not is_nsys_export(db.tables):
            raise BadInput(f"{path}: not an Nsight Systems export (no StringIds beside CUPTI/NVTX tables)")
        return _read(db, source or str(path))


class _Events:
    """Per-event columns as they are gathered, table after table."""

    def __init__(self) -> None:
        self.names = Interner()
        self.lanes = LaneTable()
        self.lane_pid: list[int] = []  # the OS process of each lane (the rank split)
        self.parts: list[tuple[np.ndarray, ...]] = []  # (start, end, lane, name, kind, corr)

    def add(self, start, end, lane, name, kind, corr) -> None:
        n = len(start)
        self.parts.append((np.asarray(start, np.int64), np.asarray(end, np.int64), np.asarray(lane, np.int32),
                           np.asarray(name, np.int32), np.broadcast_to(np.asarray(kind, np.int8), (n,)),
                           np.asarray(corr, np.int64)))

    def stream_lanes(self, pid: np.ndarray, dev: np.ndarray, stream: np.ndarray) -> np.ndarray:
        """Lane of each device row: one per (process, device, stream), named as Kineto names streams."""
        first, inv = _groups(pid, dev, stream)
        ids = np.empty(len(first), np.int32)
        for j, (p, d, s) in enumerate(zip(pid[first].tolist(), dev[first].tolist(), stream[first].tolist())):
            ids[j] = self.lanes.get(("s", p, d, s), lambda d=d, s=s: Lane(LaneKind.STREAM, f"cuda:{d}", f"stream {s}", d, s))
            self._pid(ids[j], p)
        return ids[inv]

    def thread_lanes(self, gtid: np.ndarray, tnames: dict[int, str]) -> np.ndarray:
        """Lane of each host row: one per thread (``globalTid``)."""
        uniq, inv = np.unique(gtid, return_inverse=True)
        ids = np.empty(len(uniq), np.int32)
        for j, g in enumerate(uniq.tolist()):
            pid, tid = (g >> 24) & 0xFFFFFF, g & 0xFFFFFF
            ids[j] = self.lanes.get(("t", pid, tid), lambda g=g, pid=pid, tid=tid: Lane(
                LaneKind.THREAD, "cpu", tnames.get(g) or f"thread {tid}", pid, tid))
            self._pid(ids[j], pid)
        return ids[inv.reshape(-1)]

    def _pid(self, lane: int, pid: int) -> None:
        if lane == len(self.lane_pid):
            self.lane_pid.append(pid)

    def intern(self, ids: np.ndarray, name_of) -> np.ndarray:
        """Name index of each row from its id (``name_of(id)`` called once per distinct id)."""
        uniq, inv = np.unique(ids, return_inverse=True)
        table = np.array([self.names(name_of(int(i))) for i in uniq], dtype=np.int32)
        return table[inv.reshape(-1)]


def _groups(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of the columns: a representative row index per group, and each row's group.

    One 1-D unique per column, then one over the combined small codes: a unique over a 2-D key (``axis=0``)
    sorts void records and costs several times as much on millions of rows.
    """
    code, span = np.zeros(len(cols[0]), np.int64), 1
    for c in cols:
        _, inv = np.unique(c, return_inverse=True)
        k = int(inv.max()) + 1 if len(inv) else 1
        span *= k
        if span >= 1 << 62:  # the codes would overflow (never with real streams): the slow, exact way
            _, first, inv = np.unique(np.stack(cols, axis=1), axis=0, return_index=True, return_inverse=True)
            return first, inv.reshape(-1)
        code = code * k + inv.reshape(-1)
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    return first, inv.reshape(-1)


def _pid_of(g: np.ndarray) -> np.ndarray:
    """OS process id of serialized ``globalPid`` / ``globalTid`` values (-1 where missing)."""
    return np.where(g >= 0, (g >> 24) & 0xFFFFFF, -1)


def _corr_keys(pid: np.ndarray, corr: np.ndarray, scoped: bool) -> np.ndarray:
    """Correlation ids unique across processes: CUPTI numbers them per process (-1 stays -1)."""
    key = (pid << 32) | (corr & 0xFFFFFFFF) if scoped else corr
    return np.where(corr >= 0, key, -1)


def _read(db: _Db, where: str) -> Timeline:
    ev = _Events()
    warnings: list[str] = []
    dropped = 0
    tnames = thread_names(db)

    # ---- device activity: kernels, copies, sets, synchronisation
    device = []  # (table, rows, kind of the rows)
    kc = db.cols(KERNEL) if KERNEL in db.tables else set()
    # demangledName: torch's kernels are recognised by their full names (exponential_kernel is a template argument).
    name_expr = f"COALESCE({', '.join(_nullable(kc, c) for c in ('demangledName', 'shortName', 'mangledName'))}, -1)"
    for table, extra in ((KERNEL, name_expr), (MEMCPY, None), (MEMSET, None), (SYNC, None)):
        tc = db.cols(table) if table in db.tables else set()
        what = extra or _int(tc, {MEMCPY: "copyKind", SYNC: "syncType"}.get(table, ""))  # memset: no name id
        rows, bad = db.timed(table, ", ".join((_int(tc, "deviceId"), _int(tc, "streamId"),
                                               _int(tc, "correlationId"), _int(tc, "globalPid"), what)))
        dropped += bad
        if rows is not None:
            device.append((table, rows))
    scoped = all((r[:, 5] >= 0).all() for _, r in device)  # every device row knows its process
    tasks: list[tuple[np.ndarray, ...]] = []  # (corr key, start, end, lane) of launched work, for NVTX
    for table, r in device:
        pid = _pid_of(r[:, 5])
        lane = ev.stream_lanes(pid, r[:, 2], r[:, 3])
        corr = _corr_keys(pid, r[:, 4], scoped)
        kind: Kind | np.ndarray = NSYS_TABLE_KIND[table]
        if table == KERNEL:
            name = ev.intern(r[:, 6], lambda i: db.string(i, f"kernel {i}"))
            comm = np.array([is_comm_kernel(n) for n in ev.names.names], bool)[name]
            kind = np.where(comm, Kind.COMM, kind)
        elif table == MEMCPY:
            name = ev.intern(r[:, 6], lambda k: f"Memcpy {MEMCPY_KIND[k]}" if k in MEMCPY_KIND else "Memcpy")
        elif table == MEMSET:
            name = np.full(len(r), ev.names("Memset"), np.int32)
        else:  # synchronisation waits
            name = ev.intern(r[:, 6], lambda k: SYNC_KIND.get(k, "Synchronization"))
        ev.add(r[:, 0], r[:, 1], lane, name, kind, corr)
        if table != SYNC:
            tasks.append((corr, r[:, 0], r[:, 1], lane))
    n_device = sum(len(r) for _, r in device)

    # ---- CUDA runtime calls on host threads
    rc = db.cols(RUNTIME) if RUNTIME in db.tables else set()
    rows, bad = db.timed(RUNTIME, ", ".join((_int(rc, "globalTid"), _int(rc, "correlationId"), _int(rc, "nameId"))))
    dropped += bad
    launches = None
    if rows is not None:
        dropped += int((rows[:, 2] < 0).sum())  # a call without its thread
        rows = rows[rows[:, 2] >= 0]
    if rows is not None and len(rows):
        lane = ev.thread_lanes(rows[:, 2], tnames)
        corr = _corr_keys(_pid_of(rows[:, 2]), rows[:, 3], scoped)
        ev.add(rows[:, 0], rows[:, 1], lane, ev.intern(rows[:, 4], lambda i: db.string(i, f"runtime {i}")),
               NSYS_TABLE_KIND[RUNTIME], corr)
        launches = (rows[:, 2], rows[:, 0], corr)

    # ---- NVTX ranges, and the overlay's spans on the streams their launches ran on
    overlay = _nvtx(db, ev, tnames, warnings, where)
    if overlay and launches is not None and tasks:
        _project(ev, overlay, launches, tasks)

    if dropped:
        warnings.append(f"{where}: {dropped} row(s) with missing, reversed or overflowing start/end skipped")
    if not ev.parts:
        raise BadInput(f"{where}: the export holds no kernels, copies, CUDA API calls or NVTX ranges "
                       "(was it recorded with --trace=cuda,nvtx?)")
    if n_device == 0:
        warnings.append(f"{where}: no GPU activity in the export (CUDA API calls and NVTX ranges only)")
    cols = [np.concatenate(c) for c in zip(*ev.parts)]
    meta: dict[str, Any] = {"dropped_events": {}, **export_meta(db)}
    meta["devices"] = gpu_names(db)
    meta["cuda_streams"] = stream_info(db)
    split = rank_pids(ev.lanes.lanes, ev.lane_pid, warnings, where)
    if split:
        meta["rank_pids"] = split
    return build_timeline(
        rank=0, source=where, fmt="nsys", backend="cuda", lanes=ev.lanes.lanes, names=ev.names,
        start=cols[0], dur=cols[1] - cols[0], lane=cols[2], name=cols[3], kind=cols[4],
        step=np.full(len(cols[0]), -1, np.int64), meta=meta, warnings=warnings, aligned={"correlation": cols[5]},
    )


def _nullable(cols: set[str], name: str) -> str:
    """SQL for an id column that is NULL when missing or not an integer (for COALESCE)."""
    return f"""CASE WHEN typeof("{name}") = 'integer' THEN "{name}" END""" if name in cols else "NULL"


def _range_types(db: _Db) -> list[int]:
    """Event type ids of NVTX ranges: by name from ENUM_NSYS_EVENT_TYPE when the export has it."""
    ids = dict(NVTX_RANGE_TYPES)
    if "ENUM_NSYS_EVENT_TYPE" in db.tables and {"id", "name"} <= db.cols("ENUM_NSYS_EVENT_TYPE"):
        for i, n in db.con.execute("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE"):
            if n in ids and isinstance(i, int):
                ids[n] = i
    return sorted(set(ids.values()))


def _nvtx(db: _Db, ev: _Events, tnames: dict[int, str], warnings: list[str], where: str,
          ) -> list[tuple[int, int, int, str]]:
    """Add the NVTX ranges (ANNOTATION on their thread); return the overlay's ones ``(globalTid, start, end, name)``."""
    if NVTX not in db.tables:
        return []
    cols = db.cols(NVTX)
    if "eventType" not in cols:
        return []
    types = ", ".join(str(t) for t in _range_types(db))
    text = """CASE WHEN typeof(text) = 'text' THEN text END""" if "text" in cols else "NULL"
    if "globalTid" not in cols:
        return []
    cond = f'eventType IN ({types}) AND typeof("globalTid") = \'integer\''
    sel = f"start, \"end\", globalTid, {_int(cols, 'textId')}, {text}"
    total = db.con.execute(f"SELECT count(*) FROM {NVTX} WHERE eventType IN ({types})").fetchone()[0]
    rows = db.con.execute(f"SELECT {sel} FROM {NVTX} WHERE {_VALID} AND {cond}").fetchall()
    if total > len(rows):  # unterminated ranges (end NULL): the capture ended inside them
        warnings.append(f"{where}: {total - len(rows)} NVTX range(s) without an end (or a thread) skipped")
    if not rows:
        return []
    start, end, gtid, tid, txt = zip(*rows)
    gtid_a = np.array(gtid, np.int64)
    names = [t if t else db.string(i, "(unnamed NVTX range)") for t, i in zip(txt, tid)]
    name_ix = np.array([ev.names(n) for n in names], np.int32)
    step_kind = np.array([Kind.STEP if n.startswith("ProfilerStep#") else NSYS_TABLE_KIND[NVTX] for n in names], np.int8)
    ev.add(start, end, ev.thread_lanes(gtid_a, tnames), name_ix, step_kind, np.full(len(rows), -1, np.int64))
    return [(g, s, e, n) for g, s, e, n in zip(gtid, start, end, names) if n in OVERLAY_SPANS]


def _project(ev: _Events, overlay, launches, tasks) -> None:
    """The overlay's NVTX ranges on the device, as a torch trace's gpu_user_annotation: per stream, the span of
    the work launched by runtime calls inside the range on its thread; its correlation is that of its first
    launch, so the analysis assigns it to the step in which it was launched."""
    gtid, lstart, lcorr = launches
    ok = lcorr >= 0
    corr, tstart, tend, tlane = (np.concatenate(c) for c in zip(*tasks))
    keep = corr >= 0
    wins = launched_windows(
        overlay,
        zip(gtid[ok].tolist(), lstart[ok].tolist(), lcorr[ok].tolist()),
        zip(corr[keep].tolist(), tstart[keep].tolist(), tend[keep].tolist(), tlane[keep].tolist()),
    )
    if wins:
        s, e, ln, nm, c = zip(*wins)
        ev.add(s, e, ln, [ev.names(n) for n in nm], Kind.ANNOTATION, c)

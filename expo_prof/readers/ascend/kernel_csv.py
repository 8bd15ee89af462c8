"""Ascend CSV readers: torch_npu ``kernel_details.csv``, msprof ``op_summary_*.csv`` / ``task_time_*.csv``,
and the ``step_trace_time.csv`` / ``analysis.db`` companions.

Columns are found by name (they move between versions: the 2025 files add
``Device_id`` and ``OP State``). Start times are decimal µs, often written
as ``"1736408883714269.685\\t"`` (a tab inside the field): they are parsed as
integers (:mod:`expo_prof.readers.timeparse`), never through a float.
"""

from __future__ import annotations

import csv
import io
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from expo_prof.errors import BadInput
from expo_prof.readers.builder import LaneTable, build_timeline
from expo_prof.readers.kinds import ascend_task_kind
from expo_prof.readers.timeparse import us_text_to_ns, us_texts_to_ns
from expo_prof.timeline import Interner, Kind, Lane, LaneKind, Timeline

# Alternative header names per field, first match wins.
_COLS = {
    "name": ("Name", "Op Name", "kernel_name"),
    "type": ("Type", "OP Type", "Op Type"),
    "core": ("Accelerator Core", "Task Type", "kernel_type"),
    "start": ("Start Time(us)", "Task Start Time(us)", "task_start(us)"),
    "dur": ("Duration(us)", "Task Duration(us)", "task_time(us)"),
    "stream": ("Stream ID", "Stream Id", "stream_id"),
    "step": ("Step Id", "Step ID"),
    "device": ("Device_id", "Device ID"),
    "task": ("Task ID", "task_id"),
}

_COMM_CORES = frozenset({"HCCL", "COMMUNICATION"})


def _decode_text(data: bytes | bytearray, where: str, warnings: list[str]) -> str:
    raw = bytes(data)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("utf-8-sig", errors="replace")
        warnings.append(f"{where}: {text.count(chr(0xFFFD))} invalid UTF-8 byte(s) replaced by U+FFFD")
    if "\x00" in text:
        warnings.append(f"{where}: NUL bytes removed")
        text = text.replace("\x00", "")
    return text


def _find(header: list[str], field: str) -> int | None:
    for alias in _COLS[field]:
        if alias in header:
            return header.index(alias)
    return None


def _int_cell(s: str) -> int | None:
    """An integer cell (Step Id, Device_id), or None when it is not one or does not fit an int64 column."""
    s = s.strip().strip('"').strip()
    if not s.lstrip("-").isdecimal():
        return None
    v = int(s)
    return v if -(2**63) <= v < 2**63 else None


def read_kernel_csv(data: bytes | bytearray, path: Path, *, fmt: str, rank_hint: int | None) -> Timeline:
    """Read a kernel_details.csv / op_summary_*.csv / task_time_*.csv into a Timeline of device tasks."""
    where = str(path)
    warnings: list[str] = []
    text = _decode_text(data, where, warnings)
    if not text.strip():
        raise BadInput(f"{where}: empty file")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except (StopIteration, csv.Error) as exc:
        raise BadInput(f"{where}: not a CSV table ({exc})") from None
    ci = {f: _find(header, f) for f in _COLS}
    missing = [_COLS[f][0] for f in ("name", "start", "dur") if ci[f] is None]
    if missing:
        raise BadInput(f"{where}: missing column(s) {', '.join(missing)} (not a kernel table)")
    c_name, c_start, c_dur, c_stream = ci["name"], ci["start"], ci["dur"], ci["stream"]
    assert c_name is not None and c_start is not None and c_dur is not None  # checked just above
    rows: list[list[str]] = []
    short = 0
    try:
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            rows.append(row)
    except csv.Error as exc:
        warnings.append(f"{where}: CSV broken after row {len(rows)} ({exc}); kept the rows before it")
    need = max(i for i in ci.values() if i is not None)
    good = []
    for row in rows:
        if len(row) <= need:
            short += 1
            continue
        good.append(row)
    if short:
        warnings.append(f"{where}: {short} row(s) with too few columns skipped")
    rows = good
    n = len(rows)
    if n == 0:
        raise BadInput(f"{where}: no kernel rows")

    starts_txt = [r[c_start] for r in rows]
    durs_txt = [r[c_dur] for r in rows]
    start, sbad = _parse_col(starts_txt)
    dur, dbad = _parse_col(durs_txt)
    bad = sbad | dbad
    if bad.any():
        warnings.append(f"{where}: {int(bad.sum())} row(s) with an unreadable start/duration skipped")

    no_stream = c_stream is None
    if no_stream:
        warnings.append(
            f"{where}: no Stream ID column (profiler level0 export): all kernels share one lane, so overlap "
            "between device streams cannot be measured from this file (use trace_view.json or the .db)"
        )
    lanes = LaneTable()
    names = Interner()
    lane_col = np.empty(n, dtype=np.int32)
    name_col = np.empty(n, dtype=np.int32)
    kind_col = np.empty(n, dtype=np.int8)
    step_col = np.full(n, -1, dtype=np.int64)
    devices: set[int] = set()
    types: dict[str, int] = {}
    kind_cache: dict[str, Kind] = {}
    for i, r in enumerate(rows):
        core = r[ci["core"]].strip() if ci["core"] is not None else "N/A"
        k = kind_cache.get(core)
        if k is None:
            k = kind_cache[core] = ascend_task_kind(core)
        stream = r[c_stream].strip() if c_stream is not None else None
        if core in _COMM_CORES and (stream is None or not stream.isdigit()):
            # Communication ops without a stream: op-level windows (like the
            # HCCL group lane of trace_view.json), not a device queue.
            li = lanes.get(("hccl",), lambda: Lane(LaneKind.LOGICAL, "npu", "HCCL communication"))
        elif stream is None:
            li = lanes.get(("stream", None), lambda: Lane(LaneKind.STREAM, "npu", "Stream ?"))
        else:
            sid = int(stream) if stream.isdigit() else -1
            li = lanes.get(("stream", stream), lambda s=stream, sid=sid: Lane(LaneKind.STREAM, "npu", f"Stream {s}", 0, sid))
        lane_col[i] = li
        name_col[i] = names(r[c_name])
        kind_col[i] = k
        if ci["step"] is not None:
            v = _int_cell(r[ci["step"]])
            if v is not None:
                step_col[i] = v
        if ci["device"] is not None:
            v = _int_cell(r[ci["device"]])
            if v is not None:
                devices.add(v)
        if ci["type"] is not None:
            t = r[ci["type"]]
            types[t] = types.get(t, 0) + 1
    keep = ~bad
    if not keep.any():
        raise BadInput(f"{where}: no row with a readable start time and duration ({n} rows)")
    meta: dict[str, Any] = {"columns": header}
    if len(devices) == 1:
        meta["device_id"] = next(iter(devices))
    elif len(devices) > 1:
        warnings.append(f"{where}: rows from {len(devices)} devices in one file: {sorted(devices)}")
    meta["op_types"] = types
    return build_timeline(
        rank=rank_hint if rank_hint is not None else 0,
        source=where,
        fmt=fmt,
        backend="npu",
        lanes=lanes.lanes,
        names=names,
        start=start[keep],
        dur=dur[keep],
        lane=lane_col[keep],
        name=name_col[keep],
        kind=kind_col[keep],
        step=step_col[keep],
        meta=meta,
        warnings=warnings,
    )


def _parse_col(cells: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """µs text cells → int64 ns (exact), plus a mask of unreadable cells."""
    n = len(cells)
    buf = "\x1f".join(cells).encode("utf-8", "replace")
    ns, bad = us_texts_to_ns(buf, n, sep=0x1F)
    if bad.any():
        for i in np.flatnonzero(bad):
            try:
                ns[i] = us_text_to_ns(cells[i])
                bad[i] = False
            except (ValueError, OverflowError):
                pass
    return ns, bad


# --------------------------------------------------------------------------- step_trace_time


def read_step_trace_time(path: Path) -> dict[str, Any]:
    """``step_trace_time.csv`` (or ``analysis.db``'s StepTraceTime) → columns.

    Returns ``{"source", "columns": {name: list[str]}, "us": {name: float64 µs},
    "ns": {name: int64 ns}, "step": int64}``. Times are µs in the file; ``ns``
    holds them rounded to the nearest ns (parsed from the text, so
    ``7129.459999999992`` → 7129460).
    """
    if path.suffix == ".db":
        return _step_trace_from_db(path)
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""))
    rows = [r for r in reader if r and any(c.strip() for c in r)]
    if not rows:
        raise BadInput(f"{path}: empty step_trace_time table")
    header = [h.strip() for h in rows[0]]
    body = [r for r in rows[1:] if len(r) >= len(header)]
    cols = {h: [r[i].strip() for r in body] for i, h in enumerate(header)}
    return _step_columns(str(path), cols)


# Column names of analysis.db StepTraceTime -> the CSV header names.
_DB_STEP_COLS = {
    "step": "Step",
    "computing": "Computing",
    "communication_not_overlapped": "Communication(Not Overlapped)",
    "overlapped": "Overlapped",
    "communication": "Communication",
    "free": "Free",
    "stage": "Stage",
    "bubble": "Bubble",
    "communication_not_overlapped_and_exclude_receive": "Communication(Not Overlapped and Exclude Receive)",
    "preparing": "Preparing",
}


def _step_trace_from_db(path: Path) -> dict[str, Any]:
    from expo_prof.readers.sqlite_readonly import connect_readonly

    con = connect_readonly(path)
    try:
        cur = con.execute("SELECT * FROM StepTraceTime")
        names = [d[0] for d in cur.description]
        data = cur.fetchall()
    except sqlite3.Error as exc:
        raise BadInput(f"{path}: no StepTraceTime table ({exc})") from None
    finally:
        con.close()
    cols = {_DB_STEP_COLS.get(nm, nm): [("" if r[i] is None else repr(r[i]) if isinstance(r[i], float) else str(r[i]))
                                        for r in data] for i, nm in enumerate(names)}
    return _step_columns(str(path), cols)


def _step_columns(source: str, cols: dict[str, list[str]]) -> dict[str, Any]:
    us: dict[str, np.ndarray] = {}
    ns: dict[str, np.ndarray] = {}
    for name, cells in cols.items():
        if name in ("Step", "Device_id"):
            continue
        try:
            us[name] = np.array([float(c) if c not in ("", "N/A") else np.nan for c in cells], dtype=np.float64)
        except ValueError:
            continue
        vals = np.zeros(len(cells), dtype=np.int64)
        for i, c in enumerate(cells):
            try:
                vals[i] = us_text_to_ns(c)
            except (ValueError, OverflowError):
                vals[i] = -1
        ns[name] = vals
    steps = np.array([_int_cell(c) if _int_cell(c) is not None else -1 for c in cols.get("Step", [])], dtype=np.int64)
    out: dict[str, Any] = {"source": source, "columns": cols, "us": us, "ns": ns, "step": steps}
    if "Device_id" in cols:
        out["device_id"] = np.array([_int_cell(c) if _int_cell(c) is not None else -1 for c in cols["Device_id"]],
                                    dtype=np.int64)
    return out


def attach_companions(tl: Timeline, companions: list[Path]) -> None:
    """Put step_trace_time.csv (preferred) or analysis.db StepTraceTime into ``tl.meta["step_trace_time"]``."""
    for p in sorted(companions, key=lambda q: q.suffix == ".db"):
        try:
            tl.meta["step_trace_time"] = read_step_trace_time(p)
            return
        except (BadInput, OSError, ValueError, sqlite3.Error) as exc:
            tl.warnings.append(f"{p}: step totals not read ({exc})")

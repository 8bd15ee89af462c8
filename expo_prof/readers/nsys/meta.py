"""What an nsys SQLite export says about itself: version, GPUs, streams, thread names, GPU processes.

Used by :mod:`expo_prof.readers.nsys.tables`; every table here is optional (nsys
creates tables lazily), so each function returns an empty value when its table
or column is missing.
"""

from __future__ import annotations

from typing import Any

from expo_prof.timeline import Lane, LaneKind

#: The export's version table: ``EXPORT_META_DATA`` up to nsys 2022, ``META_DATA_EXPORT`` after (same rows).
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")


def _rows(db, table: str, cols: tuple[str, ...]) -> list[tuple]:
    if table not in db.tables or not set(cols) <= db.cols(table):
        return []
    return db.con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()


def export_meta(db) -> dict[str, Any]:
    """``meta`` keys from the export's version table and session start.

    ``nsys``: the version rows (product, version, schema) and which table held them; ``fmt_version``: one line
    for the Found table (``nsys 2022.2.1.31, export schema 2.9.1``); ``utc_epoch_ns``: the capture start.
    Paths, user and host names of the table are left out (they are not needed and may be private).
    """
    out: dict[str, Any] = {}
    for table in META_TABLES:
        rows = _rows(db, table, ("name", "value"))
        if rows:
            info = {str(k): str(v) for k, v in rows if isinstance(k, str) and ("VERSION" in k or "PRODUCT" in k)}
            info["table"] = table
            out["nsys"] = info
            ver, schema = info.get("EXPORT_PRODUCT_VERSION"), info.get("EXPORT_SCHEMA_VERSION")
            parts = [f"nsys {ver}" if ver else "nsys", f"export schema {schema}" if schema else ""]
            out["fmt_version"] = ", ".join(p for p in parts if p)
            break
    for (ns,) in _rows(db, "TARGET_INFO_SESSION_START_TIME", ("utcEpochNs",)):
        if isinstance(ns, int):
            out["utc_epoch_ns"] = ns
    return out


def gpu_names(db) -> list[str]:
    """Names of the GPUs (``TARGET_INFO_GPU``), by device id."""
    rows = _rows(db, "TARGET_INFO_GPU", ("id", "name"))
    return [str(n) for i, n in sorted((r for r in rows if isinstance(r[0], int)), key=lambda r: r[0])]


def stream_info(db) -> list[dict[str, int]]:
    """CUDA streams the process created (``TARGET_INFO_CUDA_STREAM``): process, stream id, priority, flags."""
    rows = _rows(db, "TARGET_INFO_CUDA_STREAM", ("processId", "streamId", "priority", "flag"))
    # priority is a signed int the export writes as unsigned 32-bit (4294967291 = -5, a high-priority stream)
    return [{"pid": p, "stream": s, "priority": pr - (1 << 32) if pr >= 1 << 31 else pr, "flag": f} for p, s, pr, f in rows
            if all(isinstance(x, int) for x in (p, s, pr, f))]


def thread_names(db) -> dict[int, str]:
    """``globalTid`` → thread name (``ThreadNames``)."""
    rows = _rows(db, "ThreadNames", ("globalTid", "nameId"))
    return {g: db.strings[n] for g, n in rows if isinstance(g, int) and n in db.strings}


def rank_pids(lanes: list[Lane], lane_pid: list[int], warnings: list[str], where: str) -> dict[int, int]:
    """``Lane.pid`` → rank when several processes ran GPU work (one rank each), else ``{}``.

    A rank is one process: its host threads (``Lane.pid`` = the OS pid) and its streams (``Lane.pid`` = the
    device id, as Kineto writes them). Ranks are numbered by the lowest device each process used. Processes
    sharing a device cannot be told apart by their stream lanes: then nothing is split (with a warning).
    """
    devices: dict[int, set[int]] = {}
    for ln, pid in zip(lanes, lane_pid):
        if ln.kind == LaneKind.STREAM:
            devices.setdefault(pid, set()).add(int(ln.pid))
    if len(devices) < 2:
        return {}
    seen: set[int] = set()
    for devs in devices.values():
        if seen & devs:
            warnings.append(f"{where}: several processes ran work on one GPU: read as one rank")
            return {}
        seen |= devs
    out: dict[int, int] = {}
    for rank, (pid, devs) in enumerate(sorted(devices.items(), key=lambda kv: (min(kv[1]), kv[0]))):
        out[pid] = rank
        out.update({d: rank for d in devs})
    return out

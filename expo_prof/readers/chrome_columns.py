"""Column building for the Chrome-trace reader: exact times, lanes, kinds, flows, top-level metadata.

:mod:`expo_prof.readers.chrome` decodes events in batches into :class:`Cols`;
the functions here turn those into Timeline columns (all vectorised, per
file, after the last batch).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import msgspec
import numpy as np

from expo_prof.readers.kinds import COMM_KERNEL_RE, KINETO_CATS, ascend_task_kind
from expo_prof.readers.timeparse import FLOAT_EXACT_LIMIT_US, us_floats_to_ns, us_text_to_ns, us_texts_to_ns
from expo_prof.timeline import Interner, Kind, Lane, LaneKind


class Cols:
    """Column chunks (one numpy array per batch) plus the tables shared by all batches."""

    def __init__(self) -> None:
        self.ts: list[np.ndarray] = []
        self.dur: list[np.ndarray] = []
        self.bad: list[np.ndarray] = []
        self.lane: list[np.ndarray] = []
        self.name: list[np.ndarray] = []
        self.cat: list[np.ndarray] = []
        self.task: list[np.ndarray] = []
        self.corr: list[np.ndarray] = []
        self.lane_ids: dict[tuple[Any, Any], int] = {}
        self.lane_keys: list[tuple[Any, Any]] = []
        self.names = Interner()
        self.cat_ids: dict[Any, int] = {}
        self.cats: list[Any] = []
        self.task_ids: dict[Any, int] = {}
        self.tasks: list[Any] = []
        self.meta_proc: dict[Any, str] = {}
        self.meta_thread: dict[tuple[Any, Any], str] = {}
        self.meta_labels: dict[Any, str] = {}
        self.flow_ids: dict[Any, int] = {}
        self.flow_id: list[np.ndarray] = []
        self.flow_ph: list[np.ndarray] = []
        self.flow_cat: list[np.ndarray] = []
        self.flow_ts: list[np.ndarray] = []
        self.flow_bad: list[np.ndarray] = []
        self.flow_lane_ids: dict[tuple[Any, Any], int] = {}
        self.flow_lane_keys: list[tuple[Any, Any]] = []
        self.flow_lane: list[np.ndarray] = []
        self.dropped: dict[str, int] = {}
        self.n_seen = 0
        self.n_malformed = 0
        self.repairs: dict[str, int] = {}
        self.first_malformed: str | None = None
        self.warnings: list[str] = []


def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    """Concatenate per-batch column chunks."""
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)


def times_to_ns(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Convert a list of JSON ts/dur values (int, float, str, Raw, None) to int64 ns exactly."""
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    first = values[0]
    buf = None
    if isinstance(first, msgspec.Raw) and all(isinstance(v, msgspec.Raw) for v in values):
        buf = b",".join(values)
    elif isinstance(first, str) and all(isinstance(v, str) for v in values):
        buf = ",".join(values).encode("utf-8", "replace")
    if buf is not None:
        ns, bad = us_texts_to_ns(buf, n)
        if bad.any():
            for i in np.flatnonzero(bad):
                v = values[i]
                try:
                    ns[i] = us_text_to_ns(bytes(v) if isinstance(v, msgspec.Raw) else v)
                    bad[i] = False
                except (ValueError, OverflowError):
                    pass
        return ns, bad
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError):
        arr = np.asarray(values, dtype=object)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64) * 1000, np.zeros(n, dtype=bool)
    if arr.dtype.kind == "f" and np.isfinite(arr).all() and (np.abs(arr) < FLOAT_EXACT_LIMIT_US).all():
        return us_floats_to_ns(arr), np.zeros(n, dtype=bool)
    # Mixed or odd values: one by one.
    out = np.zeros(n, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    for i, v in enumerate(values):
        try:
            if isinstance(v, bool) or v is None:
                raise ValueError
            if isinstance(v, int):
                out[i] = v * 1000
            elif isinstance(v, float):
                if not abs(v) < FLOAT_EXACT_LIMIT_US:
                    raise ValueError  # not exact as a float: the caller re-reads the text
                out[i] = int(us_floats_to_ns(np.array([v]))[0])
            elif isinstance(v, (str, bytes, msgspec.Raw)):
                out[i] = us_text_to_ns(bytes(v) if isinstance(v, msgspec.Raw) else v)
            else:
                raise ValueError
        except (ValueError, OverflowError):
            bad[i] = True
    return out, bad


def _int_or(v: Any, default: int = -1) -> int:
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        m = re.search(r"-?\d+", v)
        if m:
            return int(m.group(0))
    return default


# Lane roles for Ascend processes.
_ROLE_HOST, _ROLE_DEVICE, _ROLE_RUNTIME, _ROLE_HCCL_GROUP, _ROLE_DROP = range(5)


def make_lanes(
    cols: Cols, ascend: bool, meta: dict[str, Any], lane_idx: np.ndarray, cat_idx: np.ndarray
) -> tuple[list[Lane], np.ndarray]:
    """Build Lane objects for the (pid, tid) keys seen, plus a role per lane."""
    lanes: list[Lane] = []
    roles = np.zeros(len(cols.lane_keys), dtype=np.int8)
    # A lane is a device lane (Kineto) when any of its events has a device category.
    dev_lane = np.zeros(len(cols.lane_keys), dtype=bool)
    if not ascend and len(lane_idx):
        cat_dev = np.array([KINETO_CATS.get(c, (Kind.OTHER, False))[1] if isinstance(c, str) else False
                            for c in cols.cats], dtype=bool)
        dev_lane[np.unique(lane_idx[cat_dev[cat_idx]])] = True
    for i, (pid, tid) in enumerate(cols.lane_keys):
        pi, ti = _int_or(pid, 0), _int_or(tid, 0)
        tname = cols.meta_thread.get((pid, tid))
        if ascend:
            pname = cols.meta_proc.get(pid, "")
            if pname == "Ascend Hardware":
                roles[i] = _ROLE_DEVICE
                lanes.append(Lane(LaneKind.STREAM, "npu", tname or f"Stream {ti}", pi, ti))
            elif pname == "CANN":
                roles[i] = _ROLE_RUNTIME
                lanes.append(Lane(LaneKind.THREAD, "cpu", f"CANN {tname or f'Thread {ti}'}", pi, ti))
            elif pname == "HCCL":
                if tname and "Communication" in tname:
                    roles[i] = _ROLE_HCCL_GROUP
                    lanes.append(Lane(LaneKind.LOGICAL, "npu", f"HCCL {tname}", pi, ti))
                else:  # "Plane N": the same tasks as on the communication stream
                    roles[i] = _ROLE_DROP
                    lanes.append(Lane(LaneKind.LOGICAL, "npu", f"HCCL {tname or ti}", pi, ti))
            elif pname in ("Python", ""):
                roles[i] = _ROLE_HOST
                lanes.append(Lane(LaneKind.THREAD, "cpu", tname or f"Thread {ti}", pi, ti))
            else:  # Overlap Analysis, counters' processes: derived data
                roles[i] = _ROLE_DROP
                lanes.append(Lane(LaneKind.LOGICAL, "npu", f"{pname} {tname or ti}", pi, ti))
        else:
            if dev_lane[i]:
                roles[i] = _ROLE_DEVICE
                lanes.append(Lane(LaneKind.STREAM, f"cuda:{pi}", f"stream {ti}", pi, ti))
            else:
                roles[i] = _ROLE_HOST
                lanes.append(Lane(LaneKind.THREAD, "cpu", tname or f"thread {ti}", pi, ti))
    if cols.meta_proc:
        meta["processes"] = {str(k): v for k, v in cols.meta_proc.items()}
    if cols.meta_labels:
        meta["process_labels"] = {str(k): v for k, v in cols.meta_labels.items()}
    return lanes, roles


def classify(
    cols: Cols,
    ascend: bool,
    lane_role: np.ndarray,
    lane_idx: np.ndarray,
    cat_idx: np.ndarray,
    tt_idx: np.ndarray,
    name_idx: np.ndarray,
    names: list[str],
) -> tuple[np.ndarray, np.ndarray]:
    n = len(lane_idx)
    if n == 0:
        return np.zeros(0, dtype=np.int8), np.zeros(0, dtype=bool)
    role = lane_role[lane_idx]
    if not ascend:
        cat_kind = np.array([int(KINETO_CATS.get(c, (Kind.OTHER, False))[0]) if isinstance(c, str) else int(Kind.OTHER)
                             for c in cols.cats], dtype=np.int8)
        kind = cat_kind[cat_idx]
        # Collective kernels (NCCL/RCCL) are communication, not compute.
        comm_names = np.array([bool(COMM_KERNEL_RE.search(s)) for s in names], dtype=bool)
        kind = np.where((kind == Kind.KERNEL) & comm_names[name_idx], np.int8(Kind.COMM), kind)
        return kind.astype(np.int8), np.ones(n, dtype=bool)
    # Ascend: by process role, then task type / category.
    task_kind = np.array([int(ascend_task_kind(t)) for t in cols.tasks] + [int(Kind.KERNEL)], dtype=np.int8)
    cat_kind = np.array([int(Kind.CPU_OP) if c == "cpu_op" else int(Kind.ANNOTATION) if c == "user_annotation"
                         else int(Kind.OTHER) for c in cols.cats], dtype=np.int8)
    kind = np.full(n, np.int8(Kind.OTHER), dtype=np.int8)
    dev = role == _ROLE_DEVICE
    kind[dev] = task_kind[tt_idx[dev]]  # tt_idx -1 -> last entry (KERNEL)
    host = role == _ROLE_HOST
    kind[host] = cat_kind[cat_idx[host]]
    kind[role == _ROLE_RUNTIME] = Kind.RUNTIME
    kind[role == _ROLE_HCCL_GROUP] = Kind.COMM
    keep = role != _ROLE_DROP
    return kind, keep


def flows(cols: Cols, remap: np.ndarray, base_ns: int) -> dict[str, Any]:
    """Flow events (s/f/t) as columns.

    ``id`` numbers the distinct flow ids of the file (equal ids = one flow;
    Ascend ids exceed int64, so they are interned); ``phase`` is 0 start,
    1 finish, 2 step; ``cat`` indexes ``cats``; ``lane`` is the lane of the
    flow's (pid, tid), -1 when that thread holds no kept event; ``ts`` is -1
    when unreadable.
    """
    key_lane = np.array([cols.lane_ids.get(k, -1) for k in cols.flow_lane_keys] + [-1], dtype=np.int64)
    flane = cat(cols.flow_lane, np.int64)
    raw_lane = key_lane[flane] if len(flane) else np.zeros(0, dtype=np.int64)
    lane = np.where(raw_lane >= 0, remap[np.maximum(raw_lane, 0)], -1)
    ts = cat(cols.flow_ts, np.int64)
    bad = cat(cols.flow_bad, bool)
    return {
        "id": cat(cols.flow_id, np.int64),
        "phase": cat(cols.flow_ph, np.int8),
        "cat": cat(cols.flow_cat, np.int32),
        "cats": [c if isinstance(c, str) else str(c) for c in cols.cats],
        "ts": np.where(bad, -1, ts + base_ns),
        "lane": lane.astype(np.int32),
    }


def top_meta(top: Any, where: str, warnings: list[str]) -> tuple[int, dict[str, Any], int | None, str]:
    meta: dict[str, Any] = {}
    base = top.baseTimeNanoseconds
    base_ns = 0
    if base is not None:
        if isinstance(base, int) and not isinstance(base, bool):
            base_ns = base
        else:
            try:
                base_ns = int(str(base))
            except ValueError:
                warnings.append(f"{where}: baseTimeNanoseconds {base!r} is not an integer; ignored")
    meta["base_time_ns"] = base_ns
    rank = None
    di = top.distributedInfo
    if isinstance(di, dict):
        r = di.get("rank")
        if isinstance(r, int) and not isinstance(r, bool):
            rank = r
        meta["distributed"] = {k: v for k, v in di.items() if k in ("backend", "rank", "world_size", "nccl_version")}
    devices = top.deviceProperties
    if isinstance(devices, list):
        meta["devices"] = [d.get("name") for d in devices if isinstance(d, dict)]
    for k in ("schemaVersion", "traceName", "vllm_version", "host_name", "trace_id", "cuda_runtime_version",
              "roctracer_version", "hip_runtime_version"):
        v = getattr(top, k)
        if v is not None:
            meta[k] = v
    dev_names = " ".join(str(x) for x in meta.get("devices", []) if x)
    if top.roctracer_version is not None or top.hip_runtime_version is not None or re.search(
        r"AMD|Radeon|Instinct", dev_names
    ):
        backend = "rocm"
    elif dev_names or top.cuda_runtime_version is not None:
        backend = "cuda"
    else:
        backend = "cpu"
    return base_ns, meta, rank, backend


def relabel_lanes(lanes: list[Lane], device: str) -> list[Lane]:
    """Give Ascend device lanes a concrete device name (``npu:3``) once known."""
    return [replace(ln, device=device) if ln.device == "npu" else ln for ln in lanes]

"""Column building for the Chrome-trace reader: exact times, lanes, kinds, flows, top-level metadata.

:mod:`expo_prof.readers.chrome.reader` decodes events in batches into :class:`Cols`;
the functions here turn those into Timeline columns (all vectorised, per
file, after the last batch).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import msgspec
import numpy as np

from expo_prof.readers.long_names import LongNames
from expo_prof.readers.kinds import KINETO_CATS, ascend_task_kind, is_comm_kernel
from expo_prof.readers.timeparse import FLOAT_EXACT_LIMIT_US, us_floats_to_ns, us_text_to_ns, us_texts_to_ns
from expo_prof.timeline import Kind, Lane, LaneKind


class CodeTable:
    """Distinct values in first-seen order; :meth:`codes` maps a list of values to their int32 indices.

    ``ids`` (value → index) is an insertion-ordered dict, so ``list(ids)`` is
    the table. Unhashable values raise TypeError.
    """

    __slots__ = ("ids", "_warm")

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self._warm = False

    def codes(self, values: list[Any]) -> np.ndarray:
        ids = self.ids
        n = len(values)
        if self._warm:
            # Usually every value is known already: one C-level pass.
            try:
                return np.fromiter(map(ids.__getitem__, values), np.int32, n)
            except KeyError:
                pass
        before = len(ids)
        for v in dict.fromkeys(values):
            if v not in ids:
                ids[v] = len(ids)
        # Next batch: look up first when this one brought few new values.
        self._warm = (len(ids) - before) * 64 < n
        return np.fromiter(map(ids.__getitem__, values), np.int32, n)

    @property
    def keys(self) -> list[Any]:
        return list(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


class NameTable(CodeTable):
    """The names' :class:`CodeTable`, with long names fitted to the file's budget first
    (:mod:`expo_prof.readers.long_names`): the table stays bounded whatever the names."""

    __slots__ = ("long",)

    def __init__(self) -> None:
        super().__init__()
        self.long = LongNames()

    def codes(self, values: list[Any]) -> np.ndarray:
        return super().codes(self.long.fit_all(values))


class Cols:
    """Column chunks (one numpy array per batch) plus the code tables shared by all batches."""

    def __init__(self) -> None:
        # Code tables.
        self.known_cats = True  # chunks decoded with the Kineto-categories decoder until one fails (decode.py)
        self.mixed = False  # chunks decoded as events or other JSON values first, once one held both (decode.py)
        # Where the last chunk that did not decode read past the event array's own "]" (the offset in its buffer of
        # the first byte msgspec found after the array; -1: it did not). decode.py sets it, the chunk loops read it.
        self.past_end = -1
        self.evkey = CodeTable()  # (ph, cat, pid, tid) of every event
        self.key_tables: Any = None  # batch.KeyTables of the evkey codes
        self.cat = CodeTable()
        self.name = NameTable()  # long names cut past a budget (issue 34)
        self.lane = CodeTable()  # (pid, tid) of complete events
        self.task = CodeTable()  # Ascend "Task Type"
        self.flow_id = CodeTable()
        self.flow_lane = CodeTable()  # (pid, tid) of flow events
        # Column chunks of the kept complete events.
        self.ts: list[np.ndarray] = []
        self.dur: list[np.ndarray] = []
        self.bad: list[np.ndarray] = []
        self.lane_col: list[np.ndarray] = []
        self.name_col: list[np.ndarray] = []
        self.cat_col: list[np.ndarray] = []
        self.task_col: list[np.ndarray] = []
        self.corr: list[np.ndarray] = []
        # Column chunks of the flow events.
        self.flow_id_col: list[np.ndarray] = []
        self.flow_ph: list[np.ndarray] = []
        self.flow_cat: list[np.ndarray] = []
        self.flow_ts: list[np.ndarray] = []
        self.flow_bad: list[np.ndarray] = []
        self.flow_lane_col: list[np.ndarray] = []
        # Metadata events.
        self.meta_proc: dict[Any, str] = {}
        self.meta_thread: dict[tuple[Any, Any], str] = {}
        self.meta_labels: dict[Any, str] = {}
        self.dropped: dict[str, int] = {}
        self.n_seen = 0
        self.n_malformed = 0
        self.repairs: dict[str, int] = {}
        self.first_malformed: str | None = None
        self.warnings: list[str] = []

    @property
    def cats(self) -> list[Any]:
        return self.cat.keys

    @property
    def tasks(self) -> list[Any]:
        return self.task.keys

    @property
    def lane_keys(self) -> list[tuple[Any, Any]]:
        return self.lane.keys


def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    """Concatenate per-batch column chunks."""
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)


def cat_times(parts: list[np.ndarray]) -> np.ndarray:
    """Concatenate chunks of :func:`times_to_ns` (``defer=True``) as int64 ns.

    float64 chunks are µs still to convert: all of them are converted in one
    vectorised call (per chunk, numpy's fixed cost per call would dominate).
    """
    if not parts:
        return np.zeros(0, dtype=np.int64)
    floats = [p for p in parts if p.dtype.kind == "f"]
    if not floats:
        return np.concatenate(parts).astype(np.int64, copy=False)
    conv = us_floats_to_ns(np.concatenate(floats))
    if len(floats) == len(parts):
        return conv
    out = []
    i = 0
    for p in parts:
        if p.dtype.kind == "f":
            out.append(conv[i : i + len(p)])
            i += len(p)
        else:
            out.append(p)
    return np.concatenate(out).astype(np.int64, copy=False)


def times_to_ns(values: list[Any], *, defer: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Convert a list of JSON ts/dur values (int, float, str, Raw, None) to int64 ns exactly.

    With ``defer``, float µs that convert exactly are returned as they are
    (float64) for :func:`cat_times` to convert with all the others.
    """
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
    # (NaN fails both comparisons.)
    if arr.dtype.kind == "f" and arr.max() < FLOAT_EXACT_LIMIT_US and arr.min() > -FLOAT_EXACT_LIMIT_US:
        return (arr if defer else us_floats_to_ns(arr)), np.zeros(n, dtype=bool)
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


_INT_RE = re.compile(r"-?\d+")
_AMD_RE = re.compile(r"AMD|Radeon|Instinct")


def int_or(v: Any, default: int = -1) -> int:
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        m = _INT_RE.search(v)
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
        dev_lane[lane_idx[cat_dev[cat_idx]]] = True
    for i, (pid, tid) in enumerate(cols.lane_keys):
        pi, ti = int_or(pid, 0), int_or(tid, 0)
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
        # Collective kernels (NCCL/RCCL) are communication, not compute (names of kernels only are searched).
        is_kernel = kind == Kind.KERNEL
        comm_names = np.zeros(len(names), dtype=bool)
        for i in np.flatnonzero(np.bincount(name_idx[is_kernel], minlength=len(names))).tolist():
            comm_names[i] = is_comm_kernel(names[i])
        kind = np.where(is_kernel & comm_names[name_idx], np.int8(Kind.COMM), kind)
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
    key_lane = np.array([cols.lane.ids.get(k, -1) for k in cols.flow_lane.ids] + [-1], dtype=np.int64)
    flane = cat(cols.flow_lane_col, np.int64)
    raw_lane = key_lane[flane] if len(flane) else np.zeros(0, dtype=np.int64)
    lane = np.where(raw_lane >= 0, remap[np.maximum(raw_lane, 0)], -1)
    ts = cat_times(cols.flow_ts)
    bad = cat(cols.flow_bad, bool)
    return {
        "id": _flow_ids(cols),
        "phase": cat(cols.flow_ph, np.int8),
        "cat": cat(cols.flow_cat, np.int32),
        "cats": [c if isinstance(c, str) else str(c) for c in cols.cats],
        "ts": np.where(bad, -1, ts + base_ns),
        "lane": lane.astype(np.int32),
    }


def _flow_ids(cols: Cols) -> np.ndarray:
    """Number the distinct flow ids: int64 chunks hold raw (integer) ids, int32 chunks codes into ``flow_id``."""
    parts = cols.flow_id_col
    if not parts:
        return np.zeros(0, dtype=np.int64)
    if all(p.dtype == np.int64 for p in parts):
        return unique_inverse(np.concatenate(parts))
    table = cols.flow_id
    return np.concatenate([table.codes(p.tolist()) if p.dtype == np.int64 else p for p in parts]).astype(np.int64)


def unique_inverse(a: np.ndarray) -> np.ndarray:
    """Index of each value of ``a`` among its sorted distinct values (``np.unique(a, return_inverse=True)[1]``).

    Written out because np.unique imports numpy.ma on its first call (a fixed cost per process).
    """
    n = len(a)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(a, kind="stable")
    s = a[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    inv = np.empty(n, dtype=np.int64)
    inv[order] = np.cumsum(new) - 1
    return inv


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
    ep = getattr(top, "expoProf", None)
    if isinstance(ep, dict) and isinstance(ep.get("rank_pids"), dict):
        # An expo-prof export of several ranks: load() reads it back as one Timeline per rank.
        try:
            meta["rank_pids"] = {int(k): int(v) for k, v in ep["rank_pids"].items()}
        except (TypeError, ValueError):
            warnings.append(f"{where}: expoProf.rank_pids is not a map of pid to rank; read as one rank")
    devices = top.deviceProperties
    if isinstance(devices, list):
        meta["devices"] = [d.get("name") for d in devices if isinstance(d, dict)]
    for k in ("schemaVersion", "traceName", "vllm_version", "host_name", "trace_id", "cuda_runtime_version",
              "roctracer_version", "hip_runtime_version"):
        v = getattr(top, k)
        if v is not None:
            meta[k] = v
    dev_names = " ".join(str(x) for x in meta.get("devices", []) if x)
    if top.roctracer_version is not None or top.hip_runtime_version is not None or _AMD_RE.search(dev_names):
        backend = "rocm"
    elif dev_names or top.cuda_runtime_version is not None:
        backend = "cuda"
    else:
        backend = "cpu"
    return base_ns, meta, rank, backend


def relabel_lanes(lanes: list[Lane], device: str) -> list[Lane]:
    """Give Ascend device lanes a concrete device name (``npu:3``) once known."""
    return [replace(ln, device=device) if ln.device == "npu" else ln for ln in lanes]

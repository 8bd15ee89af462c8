"""Chrome-trace JSON readers: PyTorch profiler (Kineto) and Ascend ``trace_view.json`` / msprof ``msprof_*.json``.

All three write the Chrome trace-event format; they differ in the wrapper (a
``{"traceEvents": [...]}`` object for Kineto, a bare array for Ascend), in how
events are classified (Kineto by ``cat``; Ascend by the process they sit in:
``Ascend Hardware`` / ``CANN`` / ``HCCL`` / ``Python``) and in the type of
``ts`` (numbers for Kineto, decimal strings for Ascend). See
docs/trace-formats.md.

Speed: a file is decoded while it is read (:mod:`.stream`, through a
small reused window), the event array a chunk at a time straight from the
buffer (:mod:`.decode`) into small typed Structs, turned into numpy
column chunks without a per-event Python loop (:mod:`.batch`); the
columns are then classified per file (:mod:`.columns`). See the
"Speed and memory" section of docs/trace-formats.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from expo_prof.errors import BadInput
from expo_prof.readers.builder import build_timeline, step_number
from expo_prof.readers.chrome.columns import (
    Cols,
    cat,
    cat_times,
    classify,
    flows,
    make_lanes,
    relabel_lanes,
    top_meta,
)
from expo_prof.readers.chrome.decode import Trace
from expo_prof.readers.chrome.document import read_events
from expo_prof.readers.chrome.stream import stream_events
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED, Loaded, Progress, read_bytes, repair_message
from expo_prof.readers.timeparse import FLOAT_EXACT_LIMIT_US
from expo_prof.timeline import Kind, LaneKind, Timeline

__all__ = ["read_chrome", "read_chrome_file", "relabel_lanes"]


_RANK_RE = re.compile(r"rank[-_]?(\d+)", re.I)


#: What a trace of Python calls only is, and the next step (also how the pipeline recognises it in a folder).
FRONT_END = ("only Python calls: a vLLM front-end (API server) trace, which runs no model; "
             "pass the rank-0 worker trace (its name holds the worker's rank)")


def read_chrome(
    data: bytes | bytearray | Loaded,
    path: Path,
    *,
    fmt_hint: str | None = None,
    rank_hint: int | None = None,
) -> Timeline:
    """Read a Kineto trace or an Ascend trace_view.json / msprof json (already in memory) into a Timeline.

    ``fmt_hint`` ("ascend-trace-view", "msprof") only names the source; the
    flavour (Kineto or Ascend) is taken from the content: a process named
    ``Ascend Hardware`` / ``CANN`` / ``HCCL`` means Ascend. ``rank_hint`` (from
    the directory layout) is used when the file states no rank.
    """
    where = str(path)
    # The bytes are handed over (and freed once they are columns, or once the careful path copied them).
    top, cols, warnings = read_events(data if isinstance(data, Loaded) else Loaded(data), where)
    del data
    return _timeline(top, cols, warnings, path, fmt_hint, rank_hint)


def read_chrome_file(
    path: Path,
    *,
    max_bytes: int = DEFAULT_MAX_DECOMPRESSED,
    progress: Progress | None = None,
    fmt_hint: str | None = None,
    rank_hint: int | None = None,
) -> Timeline:
    """:func:`read_chrome` on a file (plain or gzip); the reading warnings come first in the Timeline's.

    The file is decoded while it is read (:mod:`.stream`); damaged or
    unusual input is read whole and goes the careful way.
    """
    got = stream_events(path, max_bytes=max_bytes, progress=progress)
    if got is not None:
        top, cols, warnings = got
        return _timeline(top, cols, warnings, path, fmt_hint, rank_hint)
    loaded = read_bytes(path, max_bytes=max_bytes, progress=progress)
    warnings = loaded.warnings
    # Hand the Loaded over: read_chrome frees the bytes once they are columns.
    tl = read_chrome(loaded, path, fmt_hint=fmt_hint, rank_hint=rank_hint)
    tl.warnings[:0] = warnings
    return tl


def _timeline(
    top: Trace | None, cols: Cols, warnings: list[str], path: Path, fmt_hint: str | None, rank_hint: int | None
) -> Timeline:
    where = str(path)
    warnings = list(warnings)
    warnings.extend(cols.warnings)
    for what, count in cols.repairs.items():
        warnings.append(f"{where}: {repair_message(what, count)}")
    long_names = cols.name.long.warning(where)
    if long_names:
        warnings.append(long_names)
    if cols.n_malformed:
        warnings.append(f"{where}: {cols.n_malformed} malformed event(s) skipped (first: {cols.first_malformed})")
    ascend = bool({"Ascend Hardware", "CANN", "HCCL", "Overlap Analysis"} & set(cols.meta_proc.values()))
    base_ns = 0
    meta: dict[str, Any] = {}
    rank = rank_hint
    backend = "npu" if ascend else "cpu"
    if top is not None:
        base_ns, meta, rank_from_file, backend = top_meta(top, where, warnings)
        if ascend:
            backend = "npu"
        if rank_from_file is not None:
            rank = rank_from_file
    if rank is None:
        m = _RANK_RE.search(path.name)
        rank = int(m.group(1)) if m else 0
    if cols.n_seen == 0:
        raise BadInput(f"{where}: trace holds no events")

    ts_ns = cat_times(cols.ts)
    dur_ns = cat_times(cols.dur)
    bad = cat(cols.bad, bool)
    if top is not None and top.baseTimeNanoseconds is None and any("JSON is truncated" in w for w in warnings):
        if len(ts_ns) and int(ts_ns.max()) < FLOAT_EXACT_LIMIT_US * 1000:
            # Kineto writes baseTimeNanoseconds after the events: a cut file loses it.
            warnings.append(
                f"{where}: baseTimeNanoseconds was cut off with the end of the file: times are on the profiler's "
                "relative clock (durations and overlaps are unaffected)"
            )
    if bad.any():
        warnings.append(f"{where}: {int(bad.sum())} event(s) without a usable ts/dur skipped")
    if (dur_ns < 0).any():
        neg = int((dur_ns < 0).sum())
        warnings.append(f"{where}: {neg} event(s) with a negative duration set to 0")
        dur_ns = np.maximum(dur_ns, 0)
    if base_ns:
        ts_ns += base_ns  # (ts_ns is cat_times's own array)

    lane_idx = cat(cols.lane_col, np.int32)
    name_idx = cat(cols.name_col, np.int32)
    cat_idx = cat(cols.cat_col, np.int32)
    tt_idx = cat(cols.task_col, np.int32)
    names = [n if isinstance(n, str) else ("" if n is None else str(n)) for n in cols.name.ids]

    lanes, lane_role = make_lanes(cols, ascend, meta, lane_idx, cat_idx)
    kind, keep_ev = classify(cols, ascend, lane_role, lane_idx, cat_idx, tt_idx, name_idx, names)
    keep_ev &= ~bad
    steps_of_name = np.array([step_number(n) if n.startswith("ProfilerStep#") else -1 for n in names], dtype=np.int64)
    step = np.full(len(name_idx), -1, dtype=np.int64)
    if (steps_of_name >= 0).any():  # (a profile without a schedule has no ProfilerStep#N: nothing to look at)
        rows = np.flatnonzero(steps_of_name[name_idx] >= 0)
        k = kind[rows]
        rows = rows[(k == Kind.CPU_OP) | (k == Kind.ANNOTATION)]
        step[rows] = steps_of_name[name_idx[rows]]
        kind[rows] = np.int8(Kind.STEP)  # (classify's own array)
    corr = None if ascend else cat(cols.corr, np.int64)

    # Compact: drop events of dropped lanes (HCCL planes, Overlap Analysis)
    # and re-index lanes so that only used ones remain.
    if not keep_ev.all():
        sel = np.flatnonzero(keep_ev)
        ts_ns, dur_ns, lane_idx, name_idx, kind, step = (
            ts_ns[sel], dur_ns[sel], lane_idx[sel], name_idx[sel], kind[sel], step[sel],
        )
        if corr is not None:
            corr = corr[sel]
    used = np.flatnonzero(np.bincount(lane_idx, minlength=len(lanes)))
    remap = np.full(max(len(lanes), 1), -1, dtype=np.int32)
    remap[used] = np.arange(len(used), dtype=np.int32)
    lane_idx = remap[lane_idx]
    new_lanes = [lanes[i] for i in used.tolist()]
    meta["flows"] = flows(cols, remap, base_ns)
    meta["dropped_events"] = dict(cols.dropped)
    meta["events_in_file"] = cols.n_seen
    if cols.name.long.seen:
        meta["long_names"] = cols.name.long.seen  # an export cuts the passed-through long names
    if backend == "cpu" and any(ln.kind == LaneKind.STREAM for ln in new_lanes):
        backend = "cuda"
    if len(ts_ns) == 0:
        what = ", ".join(f"{k} ×{v}" for k, v in sorted(cols.dropped.items(), key=lambda kv: -kv[1])[:4])
        # Python calls and nothing else: the profile of vLLM's front-end (API server) process, which runs no model.
        front = cols.n_seen and cols.dropped.get("python_function", 0) >= 0.9 * cols.n_seen
        raise BadInput(
            f"{where}: no usable timed events ({cols.n_seen} events" + (f"; dropped: {what}" if what else "") + ")"
            + (f"; {FRONT_END}" if front else "")
        )
    return build_timeline(
        rank=rank,
        source=where,
        fmt=fmt_hint or ("ascend-trace-view" if ascend else "kineto"),
        backend=backend,
        lanes=new_lanes,
        names=names,
        start=ts_ns,
        dur=dur_ns,
        lane=lane_idx,
        name=name_idx,
        kind=kind,
        step=step,
        meta=meta,
        warnings=warnings,
        aligned={"correlation": corr} if corr is not None else None,
    )


# --------------------------------------------------------------------------- decoding

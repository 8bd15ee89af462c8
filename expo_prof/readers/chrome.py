"""Chrome-trace JSON readers: PyTorch profiler (Kineto) and Ascend ``trace_view.json`` / msprof ``msprof_*.json``.

All three write the Chrome trace-event format; they differ in the wrapper (a
``{"traceEvents": [...]}`` object for Kineto, a bare array for Ascend), in how
events are classified (Kineto by ``cat``; Ascend by the process they sit in:
``Ascend Hardware`` / ``CANN`` / ``HCCL`` / ``Python``) and in the type of
``ts`` (numbers for Kineto, decimal strings for Ascend). See
docs/trace-formats.md.

Speed: one msgspec decode into small typed Structs holding only the fields
used (unknown keys such as call stacks are skipped by the decoder), then one
Python pass that drops irrelevant events (``python_function``, counters,
instants) and appends to column lists, then numpy for everything else.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from expo_prof.errors import BadInput
from expo_prof.readers.builder import build_timeline, step_number
from expo_prof.readers.chrome_columns import (
    Cols,
    cat,
    classify,
    flows,
    make_lanes,
    relabel_lanes,
    times_to_ns,
    top_meta,
)
from expo_prof.readers.source import Loaded, decode_json, repair, repair_message
from expo_prof.readers.timeparse import FLOAT_EXACT_LIMIT_US
from expo_prof.timeline import Kind, LaneKind, Timeline

__all__ = ["read_chrome", "relabel_lanes"]


class _Args(msgspec.Struct, gc=False):
    correlation: Any = None
    name: Any = None  # metadata events: process / thread name
    labels: Any = None  # process_labels: "CPU", "GPU 0", "NPU"
    task_type: Any = msgspec.field(default=None, name="Task Type")  # Ascend hardware tasks


class _Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: _Args | None = None


class _EventRawTs(_Event, gc=False):
    # Re-decode of a batch whose float timestamps a float64 cannot hold to the ns.
    # (msgspec.Raw cannot be in a union: a missing value is the raw text "null".)
    ts: msgspec.Raw = msgspec.Raw(b"null")
    dur: msgspec.Raw = msgspec.Raw(b"null")


class _Trace(msgspec.Struct):
    # Events stay undecoded here (a slice of the input each): they are decoded
    # in batches so that only one batch of event objects exists at a time.
    traceEvents: list[msgspec.Raw] | None = None
    baseTimeNanoseconds: Any = None
    distributedInfo: Any = None
    deviceProperties: Any = None
    schemaVersion: Any = None
    roctracer_version: Any = None
    hip_runtime_version: Any = None
    cuda_runtime_version: Any = None
    cupti_version: Any = None
    traceName: Any = None
    displayTimeUnit: Any = None
    vllm_version: Any = None
    host_name: Any = None
    trace_id: Any = None


_DEC_TRACE = msgspec.json.Decoder(_Trace)
_DEC_ARRAY_RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
_DEC_EVENTS = msgspec.json.Decoder(list[_Event])
_DEC_EVENTS_RAWTS = msgspec.json.Decoder(list[_EventRawTs])
_DEC_EVENT = msgspec.json.Decoder(_Event)
_DEC_EVENT_RAWTS = msgspec.json.Decoder(_EventRawTs)
#: Events decoded per batch (bounds the memory of live event objects).
BATCH = 1 << 13


#: Complete events dropped while decoding: Python frames (94 % of a with_stack
#: trace), the whole-trace span, profiler overhead, instants.
_DROP_CATS = frozenset({"python_function", "Trace", "overhead", "cpu_instant_event", "Python", "python"})
_RANK_RE = re.compile(r"rank[-_]?(\d+)", re.I)

_FLOW_PH = {"s": 0, "f": 1, "t": 2}


def read_chrome(
    data: bytes | bytearray | Loaded,
    path: Path,
    *,
    fmt_hint: str | None = None,
    rank_hint: int | None = None,
) -> Timeline:
    """Read a Kineto trace or an Ascend trace_view.json / msprof json into a Timeline.

    ``fmt_hint`` ("ascend-trace-view", "msprof") only names the source; the
    flavour (Kineto or Ascend) is taken from the content: a process named
    ``Ascend Hardware`` / ``CANN`` / ``HCCL`` means Ascend. ``rank_hint`` (from
    the directory layout) is used when the file states no rank.
    """
    where = str(path)
    if isinstance(data, Loaded):
        # Take the bytes over so they can be freed once the events are columns.
        loaded, data = data, data.data
        loaded.data = None
    head = bytes(data[:64]).lstrip()
    if not head:
        raise BadInput(f"{where}: empty file")
    is_array = head[:1] == b"["
    top, raws, warnings = _decode(data, where, is_array)
    del data  # the raw slices keep the buffer alive only until their batch is done
    cols = Cols()
    for i in range(0, len(raws), BATCH):
        batch = raws[i : i + BATCH]
        raws[i : i + len(batch)] = itertools.repeat(None, len(batch))
        _collect_batch(batch, cols, where)
        del batch
    del raws
    warnings.extend(cols.warnings)
    for what, count in cols.repairs.items():
        warnings.append(f"{where}: {repair_message(what, count)}")
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
    if top is not None and top.baseTimeNanoseconds is None and any("JSON is truncated" in w for w in warnings):
        if len(cols.ts) and max((int(a.max()) for a in cols.ts if len(a)), default=0) < FLOAT_EXACT_LIMIT_US * 1000:
            # Kineto writes baseTimeNanoseconds after the events: a cut file loses it.
            warnings.append(
                f"{where}: baseTimeNanoseconds was cut off with the end of the file: times are on the profiler's "
                "relative clock (durations and overlaps are unaffected)"
            )
    if rank is None:
        m = _RANK_RE.search(path.name)
        rank = int(m.group(1)) if m else 0
    if cols.n_seen == 0:
        raise BadInput(f"{where}: trace holds no events")

    ts_ns = cat(cols.ts, np.int64)
    dur_ns = cat(cols.dur, np.int64)
    bad = cat(cols.bad, bool)
    if bad.any():
        warnings.append(f"{where}: {int(bad.sum())} event(s) without a usable ts/dur skipped")
    if (dur_ns < 0).any():
        neg = int((dur_ns < 0).sum())
        warnings.append(f"{where}: {neg} event(s) with a negative duration set to 0")
        dur_ns = np.maximum(dur_ns, 0)
    ts_ns = ts_ns + base_ns

    lane_idx = cat(cols.lane, np.int64)
    name_idx = cat(cols.name, np.int64)
    cat_idx = cat(cols.cat, np.int64)
    tt_idx = cat(cols.task, np.int64)
    names = [n if isinstance(n, str) else ("" if n is None else str(n)) for n in cols.names.names]

    lanes, lane_role = make_lanes(cols, ascend, meta, lane_idx, cat_idx)
    kind, keep_ev = classify(cols, ascend, lane_role, lane_idx, cat_idx, tt_idx, name_idx, names)
    keep_ev &= ~bad
    steps_of_name = np.array([step_number(n) if n.startswith("ProfilerStep#") else -1 for n in names], dtype=np.int64)
    step = steps_of_name[name_idx] if len(names) else np.zeros(0, dtype=np.int64)
    is_step = (step >= 0) & np.isin(kind, (Kind.CPU_OP, Kind.ANNOTATION))
    kind = np.where(is_step, np.int8(Kind.STEP), kind)
    step = np.where(is_step, step, -1)
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
    used = np.unique(lane_idx)
    remap = np.full(max(len(lanes), 1), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    lane_idx = remap[lane_idx]
    new_lanes = [lanes[i] for i in used]
    meta["flows"] = flows(cols, remap, base_ns)
    meta["dropped_events"] = dict(cols.dropped)
    if backend == "cpu" and any(ln.kind == LaneKind.STREAM for ln in new_lanes):
        backend = "cuda"
    if len(ts_ns) == 0:
        what = ", ".join(f"{k} ×{v}" for k, v in sorted(cols.dropped.items(), key=lambda kv: -kv[1])[:4])
        raise BadInput(
            f"{where}: no usable timed events ({cols.n_seen} events" + (f"; dropped: {what}" if what else "") + ")"
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


def _decode(data: bytes | bytearray, where: str, is_array: bool) -> tuple[_Trace | None, list[msgspec.Raw], list[str]]:
    """Decode the document, leaving each event as an undecoded slice (``msgspec.Raw``)."""
    dec = _DEC_ARRAY_RAW_EVENTS if is_array else _DEC_TRACE
    try:
        d = decode_json(data, dec, where, container="array" if is_array else "object")
    except msgspec.ValidationError as exc:
        what = "a JSON array of events" if is_array else "a trace object with a traceEvents array"
        raise BadInput(f"{where}: not {what} ({exc})") from None
    if is_array:
        return None, d.value, d.warnings
    top = d.value
    if top.traceEvents is None:
        raise BadInput(f"{where}: JSON object without a traceEvents array (not a Chrome/Kineto trace)")
    raws = top.traceEvents
    top.traceEvents = None
    return top, raws, d.warnings


def _split_events(buf: bytes) -> list[msgspec.Raw]:
    try:
        return _DEC_ARRAY_RAW_EVENTS.decode(buf)
    except msgspec.DecodeError:
        return []


def _decode_batch(raws: list[msgspec.Raw], raw_ts: bool, c: Cols) -> list[_Event]:
    """Decode one batch of events; on a type error decode one by one and skip the bad ones."""
    buf = b"[" + b",".join(raws) + b"]"
    dec = _DEC_EVENTS_RAWTS if raw_ts else _DEC_EVENTS
    repaired = False
    for _attempt in range(3):
        try:
            return dec.decode(buf)
        except msgspec.ValidationError:
            break
        except msgspec.DecodeError as exc:
            # Strings are only validated now (the first pass skipped over them).
            fixed = repair(buf, str(exc))
            if fixed is None:
                break
            buf, what, count = fixed
            repaired = True
            if not raw_ts:
                c.repairs[what] = c.repairs.get(what, 0) + count
    if repaired:
        raws = _split_events(buf) or raws
    one = _DEC_EVENT_RAWTS if raw_ts else _DEC_EVENT
    out = []
    for r in raws:
        try:
            out.append(one.decode(r))
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            c.n_malformed += 1
            if c.first_malformed is None:
                c.first_malformed = str(exc)
    return out


# --------------------------------------------------------------------------- the hot loop


def _collect_batch(raws: list[msgspec.Raw], c: Cols, where: str) -> None:
    events = _decode_batch(raws, False, c)
    ts, dur, flow_ts, lane_l, name_l, cat_l, task_l, corr_l, fid_l, fph_l, fcat_l, flane_l = _loop(events, c)
    ts_ns, ts_bad = times_to_ns(ts)
    dur_ns, dur_bad = times_to_ns(dur)
    fts_ns, fts_bad = times_to_ns(flow_ts)
    if ts_bad.any() or dur_bad.any() or fts_bad.any():
        # Floats too large to be exact: decode this batch again keeping the number text.
        if _needs_text(ts) or _needs_text(dur) or _needs_text(flow_ts):
            events = _decode_batch(raws, True, c)
            t2, d2, f2 = _times_only(events)
            if len(t2) == len(ts) and len(f2) == len(flow_ts):
                ts_ns, ts_bad = times_to_ns(t2)
                dur_ns, dur_bad = times_to_ns(d2)
                fts_ns, fts_bad = times_to_ns(f2)
    del events
    c.ts.append(ts_ns)
    c.dur.append(dur_ns)
    c.bad.append(ts_bad | dur_bad)
    c.lane.append(np.array(lane_l, dtype=np.int32))
    c.name.append(np.array(name_l, dtype=np.int32))
    c.cat.append(np.array(cat_l, dtype=np.int32))
    c.task.append(np.array(task_l, dtype=np.int32))
    c.corr.append(np.array([x if type(x) is int and -(2**63) <= x < 2**63 else -1 for x in corr_l], dtype=np.int64))
    c.flow_id.append(np.array(fid_l, dtype=np.int64))
    c.flow_ph.append(np.array(fph_l, dtype=np.int8))
    c.flow_cat.append(np.array(fcat_l, dtype=np.int32))
    c.flow_ts.append(fts_ns)
    c.flow_bad.append(fts_bad)
    c.flow_lane.append(np.array(flane_l, dtype=np.int32))


def _loop(events: list[_Event], c: Cols) -> tuple[list[Any], ...]:
    """The one Python pass over a batch: drop, intern, append (kept small on purpose)."""
    ts: list[Any] = []
    dur: list[Any] = []
    flow_ts: list[Any] = []
    lane_l: list[int] = []
    name_l: list[int] = []
    cat_l: list[int] = []
    task_l: list[int] = []
    corr_l: list[Any] = []
    fid_l: list[int] = []
    fph_l: list[int] = []
    fcat_l: list[int] = []
    flane_l: list[int] = []
    flow_ids, flow_lane_ids = c.flow_ids, c.flow_lane_ids
    ts_a, dur_a, lane_a, name_a, cat_a, task_a, corr_a = (
        ts.append, dur.append, lane_l.append, name_l.append, cat_l.append, task_l.append, corr_l.append,
    )
    intern = c.names
    lane_ids, cat_ids, task_ids = c.lane_ids, c.cat_ids, c.task_ids
    drop = _DROP_CATS
    dropped = c.dropped
    c.n_seen += len(events)
    for e in events:
        ph = e.ph
        if ph == "X":
            cat = e.cat
            try:
                if cat in drop:
                    dropped[cat] = dropped.get(cat, 0) + 1
                    continue
                key = (e.pid, e.tid)
                li = lane_ids.get(key)
                if li is None:
                    li = lane_ids[key] = len(c.lane_keys)
                    c.lane_keys.append(key)
                ci = cat_ids.get(cat)
                if ci is None:
                    ci = cat_ids[cat] = len(c.cats)
                    c.cats.append(cat)
                ni = intern(e.name)
            except TypeError:  # an unhashable pid/tid/cat/name (malformed event)
                dropped["malformed"] = dropped.get("malformed", 0) + 1
                continue
            a = e.args
            ti = -1
            if a is not None:
                corr_a(a.correlation)
                tt = a.task_type
                if tt is not None:
                    ti = task_ids.get(tt, -1) if type(tt) is str else -1
                    if ti < 0 and type(tt) is str:
                        ti = task_ids[tt] = len(c.tasks)
                        c.tasks.append(tt)
            else:
                corr_a(None)
            ts_a(e.ts)
            dur_a(e.dur)
            lane_a(li)
            name_a(ni)
            cat_a(ci)
            task_a(ti)
        elif ph == "M":
            _metadata(e, c)
        elif ph == "s" or ph == "f" or ph == "t":
            try:
                fid = flow_ids.get(e.id)
                if fid is None:
                    fid = flow_ids[e.id] = len(flow_ids)
                key = (e.pid, e.tid)
                fl = flow_lane_ids.get(key)
                if fl is None:
                    fl = flow_lane_ids[key] = len(c.flow_lane_keys)
                    c.flow_lane_keys.append(key)
                fcat = cat_ids.get(e.cat)
                if fcat is None:
                    fcat = cat_ids[e.cat] = len(c.cats)
                    c.cats.append(e.cat)
            except TypeError:
                dropped["malformed"] = dropped.get("malformed", 0) + 1
                continue
            flane_l.append(fl)
            fid_l.append(fid)
            fph_l.append(_FLOW_PH[ph])
            fcat_l.append(fcat)
            flow_ts.append(e.ts)
        else:
            k = f"ph={ph}" if isinstance(ph, str) else "ph=?"
            dropped[k] = dropped.get(k, 0) + 1
    return ts, dur, flow_ts, lane_l, name_l, cat_l, task_l, corr_l, fid_l, fph_l, fcat_l, flane_l


def _times_only(events: list[_Event]) -> tuple[list[Any], list[Any], list[Any]]:
    """The ts/dur of exactly the events :func:`_loop` keeps, in the same order (text re-decode)."""
    ts: list[Any] = []
    dur: list[Any] = []
    fts: list[Any] = []
    drop = _DROP_CATS
    for e in events:
        ph = e.ph
        if ph == "X":
            try:
                if e.cat in drop:
                    continue
                hash((e.pid, e.tid, e.cat, e.name))
            except TypeError:
                continue
            ts.append(e.ts)
            dur.append(e.dur)
        elif ph == "s" or ph == "f" or ph == "t":
            try:
                hash((e.id, e.pid, e.tid, e.cat))
            except TypeError:
                continue
            fts.append(e.ts)
    return ts, dur, fts


def _needs_text(values: list[Any]) -> bool:
    return any(type(v) is float and abs(v) >= FLOAT_EXACT_LIMIT_US for v in values)


def _metadata(e: _Event, c: Cols) -> None:
    a = e.args
    if a is None:
        return
    nm = e.name
    try:
        if nm == "process_name" and a.name is not None:
            c.meta_proc[e.pid] = str(a.name)
        elif nm == "thread_name" and a.name is not None:
            c.meta_thread[(e.pid, e.tid)] = str(a.name)
        elif nm == "process_labels" and a.labels is not None:
            c.meta_labels[e.pid] = str(a.labels)
    except TypeError:
        pass



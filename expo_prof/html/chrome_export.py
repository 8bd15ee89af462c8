"""``expo-prof export``: the run as one Chrome-trace JSON with the analysis added as tracks.

The output is the plain Trace Event Format that Perfetto UI, chrome://tracing
and MindStudio Insight open: ``{"traceEvents": [...]}`` with complete events
(``ph: "X"``, ``ts``/``dur`` in µs with ns decimals) and ``M`` metadata
events naming every process and thread.

* Every source Timeline keeps its lanes: one process per (source, original
  process), one thread per lane, events with the Kineto category of their
  kind (``kernel``, ``cpu_op``, ``user_annotation`` …) and the correlation id
  when the source had one — so ``expo_prof.readers`` reads the file back and
  the analysis finds the same instances.
* Per source, an added process ``expo-prof: rank R (fmt)`` holds the analysis:
  for each lane with instances, ``instances`` (one slice per draw, args:
  step, total/hidden/exposed ns), ``hidden`` and ``exposed`` (the pieces of
  :mod:`expo_prof.html.segments`), and one ``steps`` track. Their category is
  ``expo_prof`` and their names never match a target rule, so reading the
  export back does not count them.

Times are relative to the earliest event (``baseTimeNanoseconds`` holds it, as
in Kineto traces), which keeps every nanosecond exact in a JSON double.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from expo_prof import __version__
from expo_prof.analysis.hidden import TimelineAnalysis
from expo_prof.clocks import clock_offsets
from expo_prof.html.segments import instance_pieces
from expo_prof.timeline import Kind, LaneKind

#: First pid of the added analysis processes (well clear of real pids and device ids).
ANALYSIS_PID = 2_000_000_000
ADDED_CAT = "expo_prof"

_STREAM_CAT = {Kind.KERNEL: "kernel", Kind.COMM: "kernel", Kind.MEMCPY: "gpu_memcpy", Kind.ANNOTATION: "gpu_user_annotation",
               Kind.STEP: "gpu_user_annotation", Kind.OTHER: "cuda_sync"}
_HOST_CAT = {Kind.CPU_OP: "cpu_op", Kind.STEP: "cpu_op", Kind.ANNOTATION: "user_annotation", Kind.OVERLAY: "user_annotation",
             Kind.RUNTIME: "cuda_runtime"}


def _cat(lane_kind: LaneKind, kind: int) -> str:
    k = Kind(kind)
    if lane_kind == LaneKind.STREAM:
        return _STREAM_CAT.get(k, "kernel")
    return _HOST_CAT.get(k, "expo_prof_other")


def _us(ns: np.ndarray) -> list[float]:
    """ns (relative, int64) → µs with three exact decimals."""
    return (np.asarray(ns, dtype=np.int64) / 1000.0).tolist()


def _meta(pid: int, tid: int | None, what: str, value: Any) -> dict:
    ev: dict[str, Any] = {"ph": "M", "pid": pid, "name": what, "args": {"name" if "name" in what else "sort_index": value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _slices(name: list[str], cat: str, pid: int, tid: list[int] | int, ts: list[float], dur: list[float], args: list[dict] | None = None) -> list[dict]:
    tids = tid if isinstance(tid, list) else [tid] * len(ts)
    if args is None:
        return [{"ph": "X", "cat": cat, "name": n, "pid": pid, "tid": t, "ts": a, "dur": d} for n, t, a, d in zip(name, tids, ts, dur)]
    return [{"ph": "X", "cat": cat, "name": n, "pid": pid, "tid": t, "ts": a, "dur": d, "args": g}
            for n, t, a, d, g in zip(name, tids, ts, dur, args)]


def export(analyses: list[TimelineAnalysis], op: str | None = None) -> tuple[bytes, dict]:
    """The annotated trace (UTF-8 JSON bytes) and counts of what was written."""
    tls = [a.tl for a in analyses]
    offs, _note = clock_offsets(tls)
    starts = [int(t.start.min()) + o for t, o in zip(tls, offs) if len(t)]
    origin = min(starts) if starts else 0
    events: list[dict] = []
    stats = {"events": 0, "instances": 0, "hidden": 0, "exposed": 0, "steps": 0, "sources": len(analyses)}
    next_pid = 1
    ranks = {t.rank for t in tls}

    for gi, (a, off) in enumerate(zip(analyses, offs)):
        tl = a.tl
        shift = off - origin
        label = f"rank {tl.rank} · {tl.fmt}"
        # One process per original process of this source; one thread per lane.
        pid_of: dict[int, int] = {}
        lane_pid = np.zeros(len(tl.lanes), dtype=np.int64)
        lane_tid = np.zeros(len(tl.lanes), dtype=np.int64)
        used_tids: dict[int, set[int]] = {}
        for li, ln in enumerate(tl.lanes):
            if ln.pid not in pid_of:
                pid_of[ln.pid] = next_pid
                dev = ln.device if ln.kind == LaneKind.STREAM else "host"
                events.append(_meta(next_pid, None, "process_name", f"{label} · {dev} (pid {ln.pid})"))
                events.append(_meta(next_pid, None, "process_sort_index", next_pid))
                next_pid += 1
            p = pid_of[ln.pid]
            tid = int(ln.tid)
            taken = used_tids.setdefault(p, set())
            while tid in taken:  # lanes that share (pid, tid) in the source (overlay-log lanes)
                tid += 1_000_000
            taken.add(tid)
            lane_pid[li], lane_tid[li] = p, tid
            events.append(_meta(p, tid, "thread_name", ln.name))
            events.append(_meta(p, tid, "thread_sort_index", li))
        lk_of_lane = np.array([int(ln.kind) for ln in tl.lanes], dtype=np.int8)
        cat_table = {(lk, k): _cat(LaneKind(lk), k) for lk in set(lk_of_lane.tolist()) for k in range(len(Kind))}
        corr = tl.meta.get("correlation")
        corr = np.asarray(corr, dtype=np.int64) if corr is not None and len(corr) == len(tl) else None
        ts = _us(tl.start + shift)
        dur = _us(tl.dur)
        lk_ev = lk_of_lane[tl.lane].tolist()
        kinds = tl.kind.tolist()
        pids = lane_pid[tl.lane].tolist()
        tids = lane_tid[tl.lane].tolist()
        names = tl.names
        nm = tl.name.tolist()
        cl = corr.tolist() if corr is not None else None
        for i in range(len(tl)):
            ev = {"ph": "X", "cat": cat_table[(lk_ev[i], kinds[i])], "name": names[nm[i]], "pid": pids[i], "tid": tids[i],
                  "ts": ts[i], "dur": dur[i]}
            if cl is not None and cl[i] >= 0:
                ev["args"] = {"correlation": cl[i]}
            events.append(ev)
        stats["events"] += len(tl)

        # The analysis, as added tracks.
        apid = ANALYSIS_PID + gi
        events.append(_meta(apid, None, "process_name", f"expo-prof: {label} (hidden/exposed)"))
        events.append(_meta(apid, None, "process_sort_index", -1000 + gi))
        inst, pcs = a.inst, instance_pieces(a)
        lanes = np.unique(inst.lane).tolist()
        for k, ln in enumerate(lanes):
            base = 10 * (k + 1)
            lname = tl.lanes[int(ln)].name
            for j, what in enumerate(("instances", "hidden", "exposed")):
                target = "exponential" if op is None else f"op {op}"
                events.append(_meta(apid, base + j, "thread_name", f"{target} {what} · {lname}"))
                events.append(_meta(apid, base + j, "thread_sort_index", base + j))
            sel = np.flatnonzero(inst.lane == ln)
            tot = a.total[sel]
            args = [
                {"instance": int(i), "name": names[int(inst.name[i])], "step": int(a.step[i]), "total_ns": int(t),
                 "hidden_ns": int(h), "exposed_ns": int(e), "hidden_fraction": (float(h) / float(t)) if t else None}
                for i, t, h, e in zip(sel.tolist(), tot.tolist(), a.hidden[sel].tolist(), a.exposed[sel].tolist())
            ]
            events += _slices(["instance"] * len(sel), ADDED_CAT, apid, base, _us(inst.start[sel] + shift),
                              _us(inst.end[sel] - inst.start[sel]), args)
            in_lane = np.isin(pcs.inst, sel)
            for j, flag in ((1, True), (2, False)):
                m = np.flatnonzero(in_lane & (pcs.hidden == flag))
                pa = [{"instance": int(i), "step": int(a.step[i])} for i in pcs.inst[m].tolist()]
                events += _slices(["hidden" if flag else "exposed"] * len(m), ADDED_CAT, apid, base + j,
                                  _us(pcs.start[m] + shift), _us(pcs.end[m] - pcs.start[m]), pa)
                stats["hidden" if flag else "exposed"] += len(m)
        stats["instances"] += len(inst)
        st = a.steps
        if len(st):
            events.append(_meta(apid, 1, "thread_name", "steps"))
            events.append(_meta(apid, 1, "thread_sort_index", 1))
            end = st.end.copy()
            end[:-1] = np.minimum(end[:-1], st.start[1:])  # one track: windows must not overlap
            events += _slices([f"step {int(s)}" for s in st.ids.tolist()], ADDED_CAT, apid, 1, _us(st.start + shift),
                              _us(np.maximum(end - st.start, 0)), [{"step": int(s)} for s in st.ids.tolist()])
            stats["steps"] += len(st)

    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "displayTimeUnit": "ns",
        "baseTimeNanoseconds": origin,
        "otherData": {"tool": f"expo-prof {__version__}", "sources": [t.source for t in tls]},
        "traceEvents": events,
    }
    if len(ranks) == 1:
        doc["distributedInfo"] = {"rank": next(iter(ranks))}
    return orjson.dumps(doc) + b"\n", stats

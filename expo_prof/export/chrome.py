"""``expo-prof export`` (JSON): the recording's traces, whole, with the analysis added as tracks.

The output is the Trace Event Format (Perfetto UI, chrome://tracing,
MindStudio Insight): ``{"schemaVersion":1,"displayTimeUnit":"ns",
"otherData":{"tool":"expo-prof …"}, …, "traceEvents":[…], "expoProf":{…}}``; the
``expoProf`` trailer lists the sources (path, rank, format, counted, passed
through, the top-level keys the export could not keep at the top).

* **The source, whole.** A Chrome-trace source (Kineto, Ascend
  ``trace_view.json``, msprof JSON) is passed through from its own bytes
  (:mod:`.raw_trace`): every event, flow event, metadata event and arg,
  and its top-level keys (``deviceProperties``, ``distributedInfo``,
  ``baseTimeNanoseconds`` …). With one rank the events are copied byte for
  byte and the export's ``baseTimeNanoseconds`` is the source's, so every
  ``ts`` is unchanged; the array is written undecoded. Top-level keys that
  the export sets itself (``schemaVersion``, ``displayTimeUnit``,
  ``otherData``) are kept under ``expoProf.sources[i].top``.
* **Several ranks**: ranks never share a pid. Rank R owns the pids
  ``RANK_PID + R·1000 + n``, one per original process (its tids, threads
  and metadata unchanged; ``process_labels`` start with ``rank R``); ``ts``
  moves onto one clock; flow ids get a per-rank prefix. The trailer's
  ``expoProf.rank_pids`` maps each pid to its rank, which the Kineto reader
  uses to read such a file back as one Timeline per rank.
* **Other sources** (overlay event log, Ascend CSV / SQLite): what the
  Timeline holds, one ``X`` event per event, with the Kineto category of its
  kind; events carry their ``step`` in args (the overlay log's step of each
  span), and a step column becomes ``ProfilerStep#N`` spans so that the steps
  come back on reading. Sources that were
  read but not counted (the overlay log used for the wait, another view of
  the same rank) get the inert category ``expo_prof_source`` (the original
  in ``args.source_cat``) so that reading the export back counts nothing twice.
* **The analysis** (:mod:`.tracks`): per counted part a process
  ``expo-prof analysis · rank R (fmt)`` at pid ``ANALYSIS_PID + i``, with
  a switchback run's phase track beside the steps.

Reading the export back through ``expo_prof.readers`` gives the same
instances (rank, step, start, total/hidden/exposed ns), for one rank or
several (tests/html/test_export.py; docs/export.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from expo_prof.clocks import clock_offsets
from expo_prof.errors import BadInput
from expo_prof.export import raw_trace
from expo_prof.export.tracks import ADDED_CAT, analysis_tracks, names_cut_note, phase_track
from expo_prof.pipeline.result import RecordingResult
from expo_prof.readers.long_names import WRITTEN_BUDGET, LongNames
from expo_prof.timeline import Kind, LaneKind, Timeline
from expo_prof.version import __version__

#: First pid of the added analysis processes (well clear of real pids and device ids).
ANALYSIS_PID = 2_000_000_000
#: First pid of the processes written from a Timeline (non-JSON sources) when ranks are not merged.
TIMELINE_PID = 1_500_000_000
RANK_PID = raw_trace.RANK_PID
UNCOUNTED_CAT = raw_trace.UNCOUNTED_CAT

_STREAM_CAT = {Kind.KERNEL: "kernel", Kind.COMM: "kernel", Kind.MEMCPY: "gpu_memcpy", Kind.ANNOTATION: "gpu_user_annotation",
               Kind.STEP: "gpu_user_annotation", Kind.OTHER: "cuda_sync"}
_HOST_CAT = {Kind.CPU_OP: "cpu_op", Kind.STEP: "cpu_op", Kind.ANNOTATION: "user_annotation", Kind.OVERLAY: "user_annotation",
             Kind.RUNTIME: "cuda_runtime"}


def _cat(lane_kind: LaneKind, kind: int) -> str:
    k = Kind(kind)
    if lane_kind in (LaneKind.STREAM, LaneKind.LOGICAL):  # a logical device lane (HCCL groups) stays a device lane
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


def _dump(events: list[dict]) -> Iterator[bytes]:
    for i in range(0, len(events), raw_trace.CHUNK):
        yield b",".join(orjson.dumps(e) for e in events[i : i + raw_trace.CHUNK])


class _Plan:
    """Where each source goes: clock shift, pids, and whether it is passed through or written from its Timeline."""

    def __init__(self, rr: RecordingResult, max_bytes: int, warnings: list[str]) -> None:
        self.tls: list[Timeline] = list(rr.timelines) or [a.tl for a in rr.parts]
        counted_ids = {id(a.tl) for a in rr.parts}
        self.counted = [id(t) in counted_ids for t in self.tls]
        offs, _ = clock_offsets(self.tls)
        self.offs = offs
        self.ranks = sorted({t.rank for t in self.tls})
        self.merge_ranks = len(self.ranks) > 1
        # Sources that can be passed through: checked one at a time (load(): a first pass, a window at a time)
        # and read again while writing; the first is checked now (its top-level keys open the document).
        self.files: list[list[Path] | None] = []
        for t in self.tls:
            # (One rank of a multi-rank export read back: its file holds the other ranks too; from the timeline.)
            self.files.append(raw_trace.trace_files(t))
        # Passed-through files first (the source's events open the array), then what is written from Timelines.
        order = sorted(range(len(self.tls)), key=lambda i: self.files[i] is None)
        self.tls = [self.tls[i] for i in order]
        self.counted = [self.counted[i] for i in order]
        self.offs = offs = [offs[i] for i in order]
        self.files = [self.files[i] for i in order]
        self.max_bytes = max_bytes
        self.warnings = warnings
        self.first: raw_trace.RawTrace | None = self.load(0) if self.files and self.files[0] is not None else None
        # The export's clock: the first passed-through source's own base (its ts stay as they are) with one
        # rank; the earliest event with several (every ts is rewritten anyway).
        firsts = [int(t.start.min()) + o for t, o in zip(self.tls, offs) if len(t)]
        json_idx = [i for i, f in enumerate(self.files) if f is not None]
        if json_idx and not self.merge_ranks:
            j = json_idx[0]
            self.base = int(self.tls[j].meta.get("base_time_ns") or 0) + offs[j]
        else:
            self.base = min(firsts) if firsts else 0
        self.used_pids = {int(ln.pid) for t in self.tls for ln in t.lanes}

    def load(self, i: int) -> raw_trace.RawTrace | None:
        """Source ``i``'s own bytes, or None (with a warning) when they cannot be passed through."""
        files = self.files[i]
        if files is None:
            return None
        try:
            return raw_trace.load_raws(files, self.max_bytes)
        except BadInput as exc:
            self.warnings.append(f"export: {exc}; its events are written from the timeline (flows, args and "
                                 "metadata of that file are not kept)")
            self.files[i] = None
            return None

    def shift(self, i: int) -> int:
        """ns to add to source ``i``'s raw ts (µs·1000 relative to its own base) to put it on the export clock."""
        return int(self.tls[i].meta.get("base_time_ns") or 0) + self.offs[i] - self.base

    def free_pid(self, want: int) -> int:
        while want in self.used_pids:
            want += 100_000_000
        self.used_pids.add(want)
        return want


def export_chrome(rr: RecordingResult, op: str | None, max_bytes: int) -> tuple[Iterator[bytes], dict, list[str]]:
    """The annotated trace as byte chunks (written as they come), counts of what it holds, and warnings.

    The counts are complete once the chunks are consumed.
    """
    warnings: list[str] = []
    plan = _Plan(rr, max_bytes, warnings)
    stats: dict[str, Any] = {"events": 0, "source_events": 0, "flows": 0, "instances": 0, "hidden": 0,
                             "exposed": 0, "steps": 0, "steps_drawn": 0, "sources": len(plan.tls), "ranks": plan.ranks,
                             "passed_through": 0}
    return _chunks(rr, op, plan, stats), stats, warnings


def _chunks(rr: RecordingResult, op: str | None, plan: _Plan, stats: dict) -> Iterator[bytes]:
    sources: list[dict[str, Any]] = []
    promoted: dict[str, bytes] = {}
    for i, t in enumerate(plan.tls):
        entry: dict[str, Any] = {"path": t.source, "rank": t.rank, "fmt": t.fmt, "counted": plan.counted[i],
                                 "passed_through": plan.files[i] is not None}
        sources.append(entry)
    if plan.first is not None:
        # One rank: the first source's top-level keys become the export's (those it sets itself are kept in
        # expoProf); several ranks: every source's stay in expoProf.
        own = {"schemaVersion", "displayTimeUnit", "otherData", "baseTimeNanoseconds", "expoProf"}
        top = {}
        for k, v in plan.first.top.items():
            if plan.merge_ranks or k in own:
                top[k] = orjson.Fragment(bytes(v))
            else:
                promoted[k] = bytes(v)
        if top:
            sources[0]["top"] = top
    other: dict[str, Any] = {"tool": f"expo-prof {__version__} export", "format": "expo-prof export 2",
             "ranks_merged": plan.merge_ranks, "sources": sources}
    rank_pids = {r: raw_trace.RankPids(r) for r in plan.ranks}
    # The head: otherData is written at the end (it gathers per-source process metadata on the way).
    yield b'{"schemaVersion":1,"displayTimeUnit":"ns","otherData":' + orjson.dumps(
        {"tool": other["tool"], "format": other["format"]}) + b',"baseTimeNanoseconds":' + str(plan.base).encode()
    for key, raw in promoted.items():
        yield b"," + orjson.dumps(key) + b":" + raw
    if len(plan.ranks) == 1 and "distributedInfo" not in promoted:
        yield b',"distributedInfo":' + orjson.dumps({"rank": plan.ranks[0]})
    yield b',"traceEvents":['
    first = True

    def sep(chunk: bytes) -> bytes:
        nonlocal first
        if first:
            first = False
            return chunk
        return b"," + chunk

    for i, t in enumerate(plan.tls):
        flows = t.meta.get("flows") or {}
        stats["flows"] += len(flows.get("id", ()))
        src = plan.first if i == 0 else plan.load(i)
        plan.first = None
        if src is not None:
            if i:
                sources[i]["top"] = {k: orjson.Fragment(bytes(v)) for k, v in src.top.items()}
            sources[i]["passed_through"] = True
            stats["passed_through"] += 1
            shift = plan.shift(i)
            # A JSON trace has no table of names: a long name is written once per event (1 GB for 100 k events
            # of 10 KB, even one name on every event). Long names the reader kept whole stay whole until
            # WRITTEN_BUDGET characters of them are written; past that, and where the reader cut, they are cut.
            names = LongNames(written=WRITTEN_BUDGET) if t.meta.get("long_names") else None
            if plan.merge_ranks or shift or not plan.counted[i] or names is not None:
                # several ranks; a second file of the rank on another base; a source not counted; long names cut
                stats["source_events"] += src.n_events
                rw = raw_trace.Rewriter(rank_pids[t.rank] if plan.merge_ranks else None, shift,
                                 (i + 1) * 10**12 if plan.merge_ranks else 0, inert=not plan.counted[i], names=names)
                for c in rw.chunks(src):
                    yield sep(c)
                if names is not None and names.cuts:
                    plan.warnings.append(names.warning(f"export of {src.path}") or "")
            else:  # byte for byte, undecoded; the count is the reader's
                n = t.meta.get("events_in_file")
                stats["source_events"] += n if isinstance(n, int) and len(src.paths) == 1 else src.n_events
                for new_item, piece in raw_trace.verbatim_pieces(src):
                    yield sep(piece) if new_item else piece
            src.free()
            continue
        sources[i]["passed_through"] = False
        evs = _timeline_events(t, plan, i, rank_pids)
        stats["source_events"] += len(t)
        for c in _dump(evs):
            yield sep(c)
    if plan.merge_ranks:
        meta: list[dict] = []
        for r in plan.ranks:
            meta += raw_trace.rank_labels(rank_pids[r])
            other.setdefault("rank_pids", {}).update({str(p): r for p in rank_pids[r].pids.values()})
        for c in _dump(meta):
            yield sep(c)
    # The analysis.
    for pk, a in enumerate(rr.parts):
        ti = next((j for j, t in enumerate(plan.tls) if t is a.tl), None)
        off = plan.offs[ti] if ti is not None else 0
        apid = plan.free_pid(ANALYSIS_PID + pk)
        evs = [_meta(apid, None, "process_name", f"expo-prof analysis · rank {a.tl.rank} ({a.tl.fmt})"),
               _meta(apid, None, "process_sort_index", -1000 + pk),
               {"ph": "M", "pid": apid, "name": "process_labels", "args": {"labels": f"rank {a.tl.rank}"}}]
        tracks, st = analysis_tracks(a, op)
        for key in ("instances", "hidden", "exposed", "steps", "steps_drawn"):
            stats[key] += st[key]
        if st["names_cut"]:
            plan.warnings.append(names_cut_note(st["names_cut"]))
        on_clock = [(tr, off) for tr in tracks]
        phase = phase_track(a, plan.tls)
        if phase is not None:  # on its overlay log's clock, which may not be the part's
            pi = next((j for j, t in enumerate(plan.tls) if t is phase[1]), ti)
            on_clock.insert(0, (phase[0], plan.offs[pi] if pi is not None else off))
        for tr, o in on_clock:
            evs.append(_meta(apid, tr.sort, "thread_name", tr.name))
            evs.append(_meta(apid, tr.sort, "thread_sort_index", tr.sort))
            ts = _us(tr.start + o - plan.base)
            dur = _us(tr.end - tr.start)
            evs += [{"ph": "X", "cat": ADDED_CAT, "name": n, "pid": apid, "tid": tr.sort, "ts": s, "dur": d, "args": g}
                    for n, s, d, g in zip(tr.names, ts, dur, tr.args)]
        for c in _dump(evs):
            yield sep(c)
        stats["events"] += len(evs)
    stats["events"] += stats["source_events"]
    yield b'],"expoProf":' + orjson.dumps(other) + b"}\n"


def _timeline_events(t: Timeline, plan: _Plan, i: int, rank_pids: dict[int, raw_trace.RankPids]) -> list[dict]:
    """A source without its own bytes (overlay log, CSV, SQLite, or JSON that could not be passed through):
    one X event per Timeline event, the lanes as threads."""
    events: list[dict] = []
    shift = plan.offs[i] - plan.base
    counted = plan.counted[i]
    label = f"rank {t.rank} · {t.fmt}"
    lane_pid = np.zeros(len(t.lanes), dtype=np.int64)
    lane_tid = np.zeros(len(t.lanes), dtype=np.int64)
    pid_of: dict[int, int] = {}
    used: dict[int, set[int]] = {}
    for li, ln in enumerate(t.lanes):
        if ln.pid not in pid_of:
            dev = ln.device if ln.kind == LaneKind.STREAM else "host"
            if plan.merge_ranks:  # in the rank's block, apart from its trace's own processes
                p = pid_of[ln.pid] = rank_pids[t.rank].of(("timeline", i, int(ln.pid)))
                sort = t.rank * raw_trace.RANK_STRIDE + (p - RANK_PID) % raw_trace.RANK_STRIDE
            else:
                p = pid_of[ln.pid] = plan.free_pid(TIMELINE_PID + 1000 * i + len(pid_of))
                sort = p - TIMELINE_PID
            events.append(_meta(p, None, "process_name", f"{label} · {dev} (pid {ln.pid})"))
            events.append(_meta(p, None, "process_sort_index", sort))
        p = pid_of[ln.pid]
        tid = int(ln.tid)
        taken = used.setdefault(p, set())
        while tid in taken:  # lanes that share (pid, tid) in the source (overlay-log lanes)
            tid += 1_000_000
        taken.add(tid)
        lane_pid[li], lane_tid[li] = p, tid
        events.append(_meta(p, tid, "thread_name", ln.name))
        events.append(_meta(p, tid, "thread_sort_index", li))
    lk = np.array([int(ln.kind) for ln in t.lanes], dtype=np.int8)
    cat_table = {(a, k): _cat(LaneKind(a), k) for a in set(lk.tolist()) for k in range(len(Kind))}
    corr = t.meta.get("correlation")
    cl = np.asarray(corr, dtype=np.int64).tolist() if corr is not None and len(corr) == len(t) else None
    step = t.step.tolist() if t.step is not None and len(t.step) == len(t) else None
    ts, dur = _us(t.start + shift), _us(t.dur)
    lk_ev, kinds = lk[t.lane].tolist(), t.kind.tolist()
    pids, tids_ev = lane_pid[t.lane].tolist(), lane_tid[t.lane].tolist()
    names, nm = t.names, t.name.tolist()
    for j in range(len(t)):
        cat = cat_table[(lk_ev[j], kinds[j])]
        args: dict[str, Any] = {}
        if not counted:
            args["source_cat"] = cat
            cat = UNCOUNTED_CAT
        if cl is not None and cl[j] >= 0:
            args["correlation"] = cl[j]
        if step is not None and step[j] >= 0:
            args["step"] = step[j]
        ev = {"ph": "X", "cat": cat, "name": names[nm[j]], "pid": pids[j], "tid": tids_ev[j], "ts": ts[j], "dur": dur[j]}
        if args:
            ev["args"] = args
        events.append(ev)
    if counted and step is not None and len(t) and not (t.kind == Kind.STEP).any():
        events += _step_spans(t, int(lane_pid[0]), used, shift)
    return events


def _step_spans(t: Timeline, pid: int, used: dict[int, set[int]], shift: int) -> list[dict]:
    """A source whose steps are a column (Ascend CSV / SQLite): one ``ProfilerStep#N`` span per step over its
    events, on a thread of its own, so that reading the export back finds the same steps (the Kineto reader
    takes steps from those names)."""
    st = np.asarray(t.step)
    has = st >= 0
    if not has.any():
        return []
    ids = np.unique(st[has])
    lo = np.full(len(ids), np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(len(ids), np.iinfo(np.int64).min, dtype=np.int64)
    k = np.searchsorted(ids, st[has])
    np.minimum.at(lo, k, t.start[has])
    np.maximum.at(hi, k, t.end[has])
    tid = 999_999
    while tid in used.setdefault(pid, set()):
        tid += 1
    used[pid].add(tid)
    out = [_meta(pid, tid, "thread_name", f"steps (the step column of {t.fmt})")]
    for sid, a, b in zip(ids.tolist(), _us(lo + shift), _us(hi - lo)):
        out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{sid}", "pid": pid, "tid": tid,
                    "ts": a, "dur": b, "args": {"step": sid, "from": "step column"}})
    return out

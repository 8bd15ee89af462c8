"""``expo-prof export --format perfetto``: Perfetto's native protobuf trace (TracePackets of track events).

Perfetto UI opens it directly, without the JSON importer (no size limit of
the legacy importer, no guessing of nesting). Written with a subset of
Perfetto's own ``perfetto_trace.proto`` (:mod:`.proto`, field numbers
unchanged). What it holds, following Perfetto's track-event rules
(docs.perfetto.dev, "Converting arbitrary timestamped data to Perfetto"):

* One packet sequence (``trusted_packet_sequence_id`` 1). Its first packet
  clears the incremental state (``SEQ_INCREMENTAL_STATE_CLEARED``,
  ``first_packet_on_sequence``); event names, categories and arg names are
  interned (``InternedData``, emitted with the first packet that uses them)
  and every later packet says ``SEQ_NEEDS_INCREMENTAL_STATE``.
* Every TrackDescriptor comes before the first event; each track has a
  unique uuid and its parent is described before it. One process track per
  rank (``rank R``) with one child track per lane of each source; one
  process track per analysed part (``expo-prof analysis · rank R``) with
  the steps / instances / hidden / exposed tracks and, for a switchback run,
  the phase track (:mod:`.tracks`).
* Slices are ``TYPE_SLICE_BEGIN`` / ``TYPE_SLICE_END`` pairs. Perfetto wants
  them strictly nested per track; events of one lane that overlap without
  nesting (possible in any trace) go to the lane's next overflow track
  (``lane #2`` …), so every track stays balanced and nested. Instants are
  ``TYPE_INSTANT`` on the lane's first track.
* Timestamps (ns, absolute, on the recording's clock) never decrease along
  the sequence.
* Kineto flow events (launch → kernel) become ``flow_ids`` on the slice that
  starts the flow and ``terminating_flow_ids`` on the one that ends it;
  correlation ids and overlay-log step numbers become debug annotations.

A source holds more than its Timeline: a Chrome-trace source's other
complete events (Python frames, the whole-trace span, Ascend's derived lanes)
and its instants are read again from its bytes (:mod:`.perfetto_carry`) and
written on the tracks of their threads; what is still left out (metadata,
counters, args, flows with one end) is counted per category in the stats
(``written`` / ``left``) that the command prints. Args are kept only by the
JSON export.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np

from expo_prof.clocks import clock_offsets
from expo_prof.errors import BadInput
from expo_prof.export import raw_trace
from expo_prof.export.chrome import _cat
from expo_prof.export.perfetto_carry import Carried, carry
from expo_prof.export.tracks import ADDED_CAT, analysis_tracks, names_cut_note, phase_track
from expo_prof.pipeline.result import RecordingResult
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED
from expo_prof.timeline import LaneKind, Timeline
from expo_prof.version import __version__

#: The one packet sequence of the file.
SEQ = 1
BEGIN, END, INSTANT = 1, 2, 3  # TrackEvent.Type
SEQ_CLEARED, SEQ_NEEDS = 1, 2  # TracePacket.SequenceFlags
#: The first packet's track name starts with this (expo_prof.output.PERFETTO recognises its own files by it).
MARK = "expo-prof export"


def _varint_slow(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


#: Varints of 0 … 2**14 - 1 (iids, track uuids, lengths): looked up, not computed.
_SMALL = [_varint_slow(n) for n in range(1 << 14)]


def _varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    if n < 16384:
        return _SMALL[n]
    k = (n.bit_length() + 6) // 7
    b = bytearray(((n >> s) & 0x7F) | 0x80 for s in range(0, 7 * k, 7))
    b[-1] &= 0x7F
    return bytes(b)


def frame(packet_bytes: bytes) -> bytes:
    """One ``Trace.packet`` entry (field 1, length-delimited): a file is these, concatenated."""
    return b"\x0a" + _varint(len(packet_bytes)) + packet_bytes


def nest_levels(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slices in (start, longest first) order, and for each the first track on which it nests properly."""
    order = np.lexsort((-end, start))
    level = np.zeros(len(start), dtype=np.int64)
    stacks: list[list[int]] = []
    st, en = start.tolist(), end.tolist()
    for i in order.tolist():
        s, e = st[i], en[i]
        for k, stack in enumerate(stacks):
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or e <= stack[-1]:
                stack.append(e)
                level[i] = k
                break
        else:
            stacks.append([e])
            level[i] = len(stacks) - 1
    return order, level


def begin_end(order: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[tuple[int, int, int]]:
    """(ts, BEGIN/END, slice) for slices that nest on one track, in a valid order (non-decreasing ts)."""
    return list(zip(*begin_end_columns(order, start, end)))


def begin_end_columns(order: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[list[int], list[int], list[int]]:
    """:func:`begin_end` as three columns: ts, BEGIN/END, slice (no tuple per event: a stack trace has millions)."""
    ts: list[int] = []
    typ: list[int] = []
    idx: list[int] = []
    stack: list[int] = []
    st, en = start.tolist(), end.tolist()
    for i in order.tolist():
        s = st[i]
        while stack and en[stack[-1]] <= s:
            j = stack.pop()
            ts.append(en[j])
            typ.append(END)
            idx.append(j)
        ts.append(s)
        typ.append(BEGIN)
        idx.append(i)
        stack.append(i)
    while stack:
        j = stack.pop()
        ts.append(en[j])
        typ.append(END)
        idx.append(j)
    return ts, typ, idx


class _Writer:
    """Tracks, interning and the ordered event list of one export."""

    def __init__(self) -> None:
        from expo_prof.export.proto import perfetto_trace_subset_pb2 as pb

        self.pb = pb
        self.descriptors: list[Any] = []
        self.next_uuid = 1
        self.iids: dict[tuple[str, str], int] = {}
        # Events, in the order written, a chunk per track and call: (ts, type, track uuid, index into the
        # payload, payload); a payload is one call's (names, categories, args, {i: flow ids}, {i: terminating}).
        self.chunks: list[tuple[np.ndarray, np.ndarray, int, np.ndarray, int]] = []
        self.payloads: list[tuple] = []

    def track(self, name: str, parent: int | None = None, pid: int | None = None, rank: int | None = None) -> int:
        pb = self.pb
        uuid = self.next_uuid
        self.next_uuid += 1
        d = pb.TrackDescriptor(uuid=uuid, name=name)
        if parent is not None:
            d.parent_uuid = parent
        if pid is not None:
            d.process.pid = pid
            d.process.process_name = name
            d.child_ordering = self.pb.TrackDescriptor.EXPLICIT
        if rank is not None:
            d.sibling_order_rank = rank
        self.descriptors.append(d)
        return uuid

    def slices(self, track_name: str, parent: int, start: np.ndarray, end: np.ndarray, names: list[str],
               cats: list[str], args: list[dict | None], flows_out: dict[int, list[int]] | None = None,
               flows_in: dict[int, list[int]] | None = None, rank: int = 0,
               instants: tuple[np.ndarray, list[str], list[str]] | None = None) -> None:
        """Slices of one lane: onto as many tracks as nesting needs (``name``, ``name #2`` …); its instants
        (ts, names, cats) on the first (an instant is a slice of no duration: it nests anywhere)."""
        if len(start) == 0 and (instants is None or not len(instants[0])):
            return
        order, level = nest_levels(start, end)
        pay = len(self.payloads)
        self.payloads.append((names, cats, args, flows_out or {}, flows_in or {}))
        for k in range(int(level.max(initial=0)) + 1):
            uuid = self.track(track_name if k == 0 else f"{track_name} #{k + 1}", parent=parent, rank=rank)
            if k == 0 and instants is not None and len(instants[0]):
                n = len(instants[0])
                self.payloads.append((instants[1], instants[2], [None] * n, {}, {}))
                self._chunk(instants[0], [INSTANT] * n, uuid, range(n), len(self.payloads) - 1)
            ts, typ, idx = begin_end_columns(order[level[order] == k], start, end)
            self._chunk(ts, typ, uuid, idx, pay)

    def _chunk(self, ts: Any, typ: Any, uuid: int, idx: Any, pay: int) -> None:
        self.chunks.append((np.asarray(ts, dtype=np.int64), np.asarray(typ, dtype=np.int8), uuid,
                            np.asarray(idx, dtype=np.int64), pay))

    def count(self) -> int:
        """Slices and instants written."""
        return sum(int((c[1] != END).sum()) for c in self.chunks)

    def _iid(self, kind: str, s: str, new: dict[str, list]) -> int:
        key = (kind, s)
        i = self.iids.get(key)
        if i is None:
            i = self.iids[key] = len(self.iids) + 1
            new[kind].append((i, s))
        return i

    def packets(self) -> Iterator[bytes]:
        pb = self.pb
        root = pb.TracePacket(trusted_packet_sequence_id=SEQ, first_packet_on_sequence=True,
                              incremental_state_cleared=True, sequence_flags=SEQ_CLEARED)
        root.track_descriptor.CopyFrom(self.descriptors[0])
        yield frame(root.SerializeToString())
        for d in self.descriptors[1:]:
            p = pb.TracePacket(trusted_packet_sequence_id=SEQ, sequence_flags=SEQ_NEEDS)
            p.track_descriptor.CopyFrom(d)
            yield frame(p.SerializeToString())
        ch = self.chunks
        # In time order; at equal times in the order written (a track's BEGIN/END list is valid in that order).
        ts_all = np.concatenate([c[0] for c in ch]) if ch else np.zeros(0, dtype=np.int64)
        order = np.argsort(ts_all, kind="stable")
        ts_bytes = _varints(ts_all[order])
        typ_all, idx_all = (np.concatenate([c[k] for c in ch])[order].tolist() if ch else [] for k in (1, 3))
        uuid_all, pay_all = (np.repeat([c[k] for c in ch], [len(c[0]) for c in ch])[order].tolist() if ch else []
                             for k in (2, 4))
        # Track-event packets are encoded by hand (field numbers of the proto subset; tests decode every
        # packet with the generated classes): building a message object per event costs 4x more. The bytes
        # after the timestamp of an event without args or flows depend only on (type, track, name, category)
        # once those are interned: made once (a stack's frames recur on every call).
        iid = self._iid
        tails: dict[tuple, bytes] = {}
        buf: list[bytes] = []
        payloads = self.payloads
        name: Any  # None for an END, else the event's (its str is interned below)
        cat: Any
        for tv, typ, uuid, i, p in zip(ts_bytes, typ_all, uuid_all, idx_all, pay_all):
            if typ == END:
                name = cat = args = fo = fi = None
            else:
                names, cats, argl, fos, fis = payloads[p]
                name, cat, args, fo, fi = names[i], cats[i], argl[i], fos.get(i), fis.get(i)
            plain = not (args or fo or fi)
            tail = tails.get((typ, uuid, name, cat)) if plain else None
            if tail is None:
                te = _TYPE[typ] + b"\x58" + _varint(uuid)
                idata = b""
                if typ != END:
                    new: dict[str, list] = {"name": [], "cat": [], "arg": []}
                    te += b"\x50" + _varint(iid("name", name, new)) + b"\x18" + _varint(iid("cat", cat, new))
                    if args:
                        for k, v in args.items():
                            da = b"\x08" + _varint(iid("arg", k, new)) + _value(v)
                            te += b"\x22" + _varint(len(da)) + da
                    for f in fo or ():
                        te += _FLOW + _U64.pack(f)
                    for f in fi or ():
                        te += _TERM_FLOW + _U64.pack(f)
                    if new["name"] or new["cat"] or new["arg"]:
                        idata = b"".join(_len_field(tag, _interned(j, s_))
                                         for tag, key in ((b"\x0a", "cat"), (b"\x12", "name"), (b"\x1a", "arg"))
                                         for j, s_ in new[key])
                        idata = b"\x62" + _varint(len(idata)) + idata
                tail = _SEQ_NEEDS + b"\x5a" + _varint(len(te)) + te
                if plain:
                    tails[(typ, uuid, name, cat)] = tail  # (interned now: later uses need no InternedData)
                tail += idata
            buf.append(b"\x0a" + _varint(1 + len(tv) + len(tail)) + b"\x40" + tv + tail)
            if len(buf) >= 8192:
                yield b"".join(buf)
                buf = []
        if buf:
            yield b"".join(buf)


def _varints(a: np.ndarray) -> list[bytes]:
    """Protobuf varints of a non-negative int64 array, computed column-wise (one Python slice per value)."""
    u = a.astype(np.uint64)
    n = np.ones(len(u), dtype=np.int64)
    for k in range(1, 10):
        n += u >= np.uint64(1 << (7 * k))
    mat = np.zeros((len(u), 10), dtype=np.uint8)
    for k in range(10):
        more = (n > k + 1).astype(np.uint8) << np.uint8(7)
        mat[:, k] = ((u >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8) | more
    raw = mat.tobytes()
    return [raw[10 * i : 10 * i + m] for i, m in enumerate(n.tolist())]


#: Pieces of hand-encoded packets: (field << 3 | wire type) tags of the proto subset.
_SEQ_NEEDS = b"\x50\x01\x68\x02"  # trusted_packet_sequence_id (10) = 1, sequence_flags (13) = NEEDS_INCREMENTAL_STATE
_TYPE = {BEGIN: b"\x48\x01", END: b"\x48\x02", INSTANT: b"\x48\x03"}  # TrackEvent.type (9)
_FLOW, _TERM_FLOW = _varint((47 << 3) | 1), _varint((48 << 3) | 1)  # flow_ids / terminating_flow_ids: fixed64
_U64 = struct.Struct("<Q")
_NONE = np.zeros(0, dtype=np.int64)  # no events
_F64 = struct.Struct("<d")


def _len_field(tag: bytes, body: bytes) -> bytes:
    return tag + _varint(len(body)) + body


def _interned(iid: int, name: str) -> bytes:
    """EventName / EventCategory / DebugAnnotationName: iid (1), name (2)."""
    return b"\x08" + _varint(iid) + _len_field(b"\x12", name.encode("utf-8", "replace"))


def _value(v: Any) -> bytes:
    """A DebugAnnotation's value field."""
    if isinstance(v, bool):
        return b"\x10" + (b"\x01" if v else b"\x00")  # bool_value (2)
    if isinstance(v, int) and -(1 << 63) <= v < (1 << 63):
        return b"\x20" + _varint(v & 0xFFFFFFFFFFFFFFFF)  # int_value (4): two's complement varint
    if isinstance(v, float):
        return b"\x29" + _F64.pack(v)  # double_value (5)
    if v is None:
        return _len_field(b"\x4a", b"null")  # legacy_json_value (9)
    return _len_field(b"\x32", str(v).encode("utf-8", "replace"))  # string_value (6)


def _flow_ends(t: Timeline, lane_sel: dict[int, np.ndarray],
               prefix: int) -> tuple[dict[int, list[int]], dict[int, list[int]], int, Counter]:
    """Kineto flow events placed on the Timeline events they start and end at: {event: [flow id]} for the
    starts and for the ends, how many flows with both ends in the source found no event for one, and the
    flows placed per category (a flow id is ``prefix`` + the file's id)."""
    fl = t.meta.get("flows") or {}
    ids = np.asarray(fl.get("id", ()), dtype=np.int64)
    out: dict[int, list[int]] = {}
    inn: dict[int, list[int]] = {}
    placed: Counter = Counter()
    if not len(ids):
        return out, inn, 0, placed
    phase = np.asarray(fl["phase"])
    # One flow is one (category, id): Kineto numbers ac2g and fwdbwd flows independently.
    fcat = np.asarray(fl.get("cat", np.zeros(len(ids))), dtype=np.int64)
    ncat = int(fcat.max(initial=0)) + 1
    cat_names = list(fl.get("cats") or [])
    ids = ids * ncat + fcat
    lane = np.asarray(fl["lane"])
    ts = np.asarray(fl["ts"], dtype=np.int64)
    # A flow is drawn when both ends are found; ids with one end only are left out.
    ends: dict[int, list[tuple[int, int]]] = {}
    for ln, sel in lane_sel.items():
        m = np.flatnonzero((lane == ln) & (ts >= 0))
        if not len(m) or not len(sel):
            continue
        order = sel[np.argsort(t.start[sel], kind="stable")]
        st = t.start[order]
        en = st + t.dur[order]
        pos = np.searchsorted(st, ts[m], side="right") - 1
        ok = pos >= 0
        pos_c = np.maximum(pos, 0)
        ok &= en[pos_c] >= ts[m]
        for fi, good, p in zip(m.tolist(), ok.tolist(), pos_c.tolist()):
            if good:
                ends.setdefault(int(ids[fi]), []).append((int(phase[fi]), int(order[p])))
    for fid, pts in ends.items():
        starts = [e for ph, e in pts if ph == 0]
        fins = [e for ph, e in pts if ph == 1]
        if starts and fins:
            out.setdefault(starts[0], []).append(prefix + fid)
            inn.setdefault(fins[0], []).append(prefix + fid)
            c = fid % ncat
            placed[str(cat_names[c]) if c < len(cat_names) else "?"] += 1
    whole = set(ids[phase == 0].tolist()) & set(ids[phase == 1].tolist())  # flows with both ends in the source
    missed = len(whole) - sum(1 for f in whole if f in ends and {0, 1} <= {ph for ph, _ in ends[f]})
    return out, inn, missed, placed


def export_perfetto(rr: RecordingResult, op: str | None,
                    max_bytes: int = DEFAULT_MAX_DECOMPRESSED) -> tuple[Iterator[bytes], dict, list[str]]:
    """The recording as a Perfetto protobuf trace: byte chunks, counts, warnings.

    ``stats["written"]`` / ``stats["left"]`` count the sources' events by category: what the file holds and
    what it leaves out (:mod:`.perfetto_carry`).
    """
    w = _Writer()
    warnings: list[str] = []
    tls: list[Timeline] = list(rr.timelines) or [a.tl for a in rr.parts]
    offs, _ = clock_offsets(tls)
    carried = [_carried(t, max_bytes, warnings) for t in tls]
    # Perfetto's timestamps are unsigned: a source placed before 0 (another clock) moves up with the rest.
    low = min((int(x.min()) + o for t, c, o in zip(tls, carried, offs)
               for x in (t.start, c.start if c else _NONE, c.inst_ts if c else _NONE) if len(x)), default=0)
    if low < 0:
        offs = [o - low for o in offs]
    ranks = sorted({t.rank for t in tls})
    stats: dict[str, Any] = {"events": 0, "source_events": 0, "flows": 0, "instances": 0, "hidden": 0, "exposed": 0,
                             "steps": 0, "steps_drawn": 0, "sources": len(tls), "ranks": ranks, "tracks": 0,
                             "written": Counter(),
                             "left": Counter(), "reread": sum(c is not None for c in carried)}
    w.track(f"{MARK} · expo-prof {__version__}")
    proc = {r: w.track(f"rank {r}", pid=1000 + r, rank=r) for r in ranks}
    several = {r: sum(t.rank == r for t in tls) > 1 for r in ranks}
    missed = 0
    for si, (t, c, off) in enumerate(zip(tls, carried, offs)):
        start = t.start + off
        end = start + t.dur
        names = [t.names[i] for i in t.name.tolist()]
        lk = np.array([int(ln.kind) for ln in t.lanes], dtype=np.int8)
        kinds = t.kind.tolist()
        cats = [_cat(LaneKind(a), k) for a, k in zip(lk[t.lane].tolist(), kinds)]
        corr = t.meta.get("correlation")
        cl = np.asarray(corr, dtype=np.int64).tolist() if corr is not None and len(corr) == len(t) else None
        step = t.step.tolist() if t.step is not None and len(t.step) == len(t) else None
        args: list[dict | None] = []
        for j in range(len(t)):
            ea: dict[str, Any] = {}  # the event's args
            if cl is not None and cl[j] >= 0:
                ea["correlation"] = cl[j]
            if step is not None and step[j] >= 0:
                ea["step"] = step[j]
            args.append(ea or None)
        lane_sel = {li: np.flatnonzero(t.lane == li) for li in range(len(t.lanes))}
        fo, fi, miss, placed = _flow_ends(t, lane_sel, (si + 1) << 40)
        missed += miss
        stats["flows"] += sum(len(v) for v in fo.values())
        # The source's own threads: the Timeline's lanes, then the threads only its other events are on. On
        # each, the Timeline's events first (the flows' positions are theirs), then the source's others.
        x = c or Carried()
        threads = [(li, ln.name) for li, ln in enumerate(t.lanes)] + [(-1, n) for lane, n in x.tracks if lane < 0]
        extra_of = _by_track(x, len(t.lanes))
        for k, (li, lname) in enumerate(threads):
            sel = lane_sel[li] if li >= 0 else _NONE
            xs, xi = extra_of.get(k, (_NONE, _NONE))
            mine, more, inst = sel.tolist(), xs.tolist(), xi.tolist()
            w.slices(f"{t.fmt} · {lname}" if several[t.rank] else lname, proc[t.rank],
                     np.concatenate([start[sel], x.start[xs] + off]), np.concatenate([end[sel], x.end[xs] + off]),
                     [names[i] for i in mine] + [x.names[i] for i in more],
                     [cats[i] for i in mine] + [x.cats[i] for i in more], [args[i] for i in mine] + [None] * len(more),
                     _local(fo, sel), _local(fi, sel), rank=10 * si + k,
                     instants=(x.inst_ts[xi] + off, [x.inst_names[i] for i in inst], [x.inst_cats[i] for i in inst]))
        written, left = _tally(t, c, placed, cats)
        stats["written"].update(written)
        stats["left"].update(left)
    if missed:
        warnings.append(f"export: {missed} flow(s) of the source have an end on no exported event; left out")
    for k, a in enumerate(rr.parts):
        ti = next((j for j, t in enumerate(tls) if t is a.tl), None)
        off = offs[ti] if ti is not None else 0
        pt = w.track(f"expo-prof analysis · rank {a.tl.rank} ({a.tl.fmt})", pid=100_000 + k, rank=-1000 + k)
        tracks, st = analysis_tracks(a, op)
        for key in ("instances", "hidden", "exposed", "steps", "steps_drawn"):
            stats[key] += st[key]
        if st["names_cut"]:
            warnings.append(names_cut_note(st["names_cut"]))
        on_clock = [(tr, off) for tr in tracks]
        phase = phase_track(a, tls)
        if phase is not None:  # on its overlay log's clock, which may not be the part's
            pi = next((j for j, t in enumerate(tls) if t is phase[1]), ti)
            on_clock.insert(0, (phase[0], offs[pi] if pi is not None else off))
        for tr, o in on_clock:
            w.slices(tr.name, pt, tr.start + o, tr.end + o, tr.names, [ADDED_CAT] * len(tr.names),
                     list(tr.args), rank=tr.sort)
    stats["tracks"] = len(w.descriptors)
    stats["events"] = w.count()
    stats["source_events"] = sum(stats["written"].values())
    return w.packets(), stats, warnings


def _carried(t: Timeline, max_bytes: int, warnings: list[str]) -> Carried | None:
    """What the source of ``t`` holds beyond it (None when it is no Chrome trace, or cannot be read again)."""
    files = raw_trace.trace_files(t, split_ok=True)
    if files is None:
        return None
    try:
        src = raw_trace.load_raws(files, max_bytes)
    except BadInput as exc:
        warnings.append(f"export: {exc}; only the events the timeline holds are in the file")
        return None
    try:
        c = carry(t, src)
    finally:
        src.free()
    if c.kept != len(t):  # (the reader's choice of events, made again here, came out otherwise)
        warnings.append(f"export: {t.source}: {c.kept} of its complete events taken for the {len(t)} the timeline "
                        "holds; the counts of what the file holds may be off by the difference")
    return c


def _by_track(c: Carried, n_lanes: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{thread (a Timeline lane, or n_lanes + k for the k-th thread of its own): (its slices, its instants)}."""
    # Carried numbers its tracks in the order it met them; the export numbers the lanes first.
    own = [n_lanes + sum(1 for lane, _ in c.tracks[:k] if lane < 0) if lane < 0 else lane
           for k, (lane, _) in enumerate(c.tracks)]
    to = np.array(own, dtype=np.int64)
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    sl, it = to[c.track] if len(c.track) else c.track, to[c.inst_track] if len(c.inst_track) else c.inst_track
    for k in set(own):
        out[k] = (np.flatnonzero(sl == k) if len(sl) else _NONE, np.flatnonzero(it == k) if len(it) else _NONE)
    return out


def _tally(t: Timeline, c: Carried | None, placed: Counter, cats: list[str]) -> tuple[Counter, Counter]:
    """The source's events by label: in the file, left out (flow events: two per flow placed, the rest out)."""
    if c is not None:
        written, left, flow_events = Counter(c.written), Counter(c.left), c.flow_events
    else:
        # Not read again: the Timeline's events by the category written for them, and the reader's own count
        # of what it dropped.
        written = Counter(cats)
        left = Counter(t.meta.get("dropped_events") or {})
        fl = t.meta.get("flows") or {}
        fnames = list(fl.get("cats") or [])
        flow_events = Counter(str(fnames[k]) if k < len(fnames) else "?" for k in np.asarray(fl.get("cat", ())).tolist())
        n = t.meta.get("events_in_file")
        rest = n - len(t) - sum(left.values()) - sum(flow_events.values()) if isinstance(n, int) else 0
        if rest > 0 and "split_from" not in t.meta:
            left["metadata or no usable time"] += rest
    for cat, n in flow_events.items():
        k = 2 * placed.get(cat, 0)
        written[f"flow {cat}"] += k
        left[f"flow {cat}"] += n - k
    return +written, +left


def _local(d: dict[int, list[int]], sel: np.ndarray) -> dict[int, list[int]]:
    """{Timeline event: flows} → {position in ``sel`` (sorted event indices): flows}."""
    if not d or not len(sel):
        return {}
    keys = np.fromiter(d.keys(), dtype=np.int64, count=len(d))
    pos = np.searchsorted(sel, keys)
    ok = (pos < len(sel)) & (sel[np.minimum(pos, len(sel) - 1)] == keys)
    return {int(p): d[int(k)] for k, p, g in zip(keys.tolist(), pos.tolist(), ok.tolist()) if g}

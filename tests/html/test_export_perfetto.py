"""``expo-prof export --format perfetto``: decoded with the same proto, checked against Perfetto's track-event rules.

The rules (docs.perfetto.dev → "Converting arbitrary timestamped data to Perfetto" and the TrackEvent
reference): packets carry a non-zero trusted_packet_sequence_id; a sequence that interns data starts by
clearing its incremental state, and later packets say they need it; interned ids are defined before use;
track uuids are unique and a track's parent is described before it; every event's track is described before
the event; TYPE_SLICE_BEGIN / TYPE_SLICE_END are balanced and properly nested per track (a TYPE_INSTANT is a
slice of no duration); timestamps do not decrease along the sequence; a flow id starts once and terminates once.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter, defaultdict

import chrome_tally  # type: ignore[import-not-found]
import numpy as np
import pytest
from export_helpers import RUN_WITH_LOG, export, two_ranks  # type: ignore[import-not-found]

from expo_prof import readers
from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.export.perfetto import MARK, begin_end, nest_levels
from expo_prof.export.proto import perfetto_trace_subset_pb2 as pb
from expo_prof.analysis.overlap.pieces import instance_pieces
from expo_prof.pipeline import Options, run

BEGIN, END, INSTANT = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END, pb.TrackEvent.TYPE_INSTANT


def decode(path) -> pb.Trace:
    t = pb.Trace()
    t.ParseFromString(path.read_bytes())
    return t


def check_rules(trace: pb.Trace) -> dict:
    """Assert Perfetto's track-event rules; return the slices per track name: [(start, end, name, args)], the
    slices per category: [(start, end, name, track name)], and the instants: [(ts, name, category, track name)]."""
    pk = list(trace.packet)
    assert pk, "empty trace"
    first = pk[0]
    assert first.first_packet_on_sequence and first.incremental_state_cleared
    assert first.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    uuids: dict[int, str] = {}
    interned: dict[str, dict[int, str]] = {"name": {}, "cat": {}, "arg": {}}
    stacks: dict[int, list] = defaultdict(list)
    slices: dict[str, list] = defaultdict(list)
    by_cat: dict[str, list] = defaultdict(list)
    instants: list[tuple] = []
    flows_start: Counter = Counter()
    flows_end: Counter = Counter()
    last_ts = -1
    for i, p in enumerate(pk):
        assert p.trusted_packet_sequence_id == 1
        if i:
            assert p.sequence_flags == pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            assert d.uuid and d.uuid not in uuids, "track uuids are unique"
            if d.HasField("parent_uuid"):
                assert d.parent_uuid in uuids, "a parent is described before its child"
            uuids[d.uuid] = d.name
            continue
        assert p.HasField("track_event")
        for what, table in (("name", p.interned_data.event_names), ("cat", p.interned_data.event_categories),
                            ("arg", p.interned_data.debug_annotation_names)):
            for e in table:
                assert e.iid not in interned[what], "an iid is defined once"
                interned[what][e.iid] = e.name
        te = p.track_event
        assert te.track_uuid in uuids, "events go on described tracks"
        assert p.timestamp >= last_ts, "timestamps never decrease along the sequence"
        last_ts = p.timestamp
        if te.type in (BEGIN, INSTANT):
            assert te.name_iid in interned["name"] and all(c in interned["cat"] for c in te.category_iids)
            (cat,) = [interned["cat"][c] for c in te.category_iids]
            if te.type == INSTANT:
                assert not te.debug_annotations and not te.flow_ids and not te.terminating_flow_ids
                instants.append((p.timestamp, interned["name"][te.name_iid], cat, uuids[te.track_uuid]))
                continue
            args = {}
            for da in te.debug_annotations:
                assert da.name_iid in interned["arg"]
                args[interned["arg"][da.name_iid]] = getattr(da, da.WhichOneof("value"))
            stacks[te.track_uuid].append((p.timestamp, interned["name"][te.name_iid], args, cat))
            flows_start.update(te.flow_ids)
            flows_end.update(te.terminating_flow_ids)
        else:
            assert te.type == END
            assert stacks[te.track_uuid], "an END closes an open slice of its own track"
            s, name, args, cat = stacks[te.track_uuid].pop()
            assert p.timestamp >= s
            parent = stacks[te.track_uuid][-1] if stacks[te.track_uuid] else None
            assert parent is None or parent[0] <= s, "properly nested"
            slices[uuids[te.track_uuid]].append((s, p.timestamp, name, args))
            by_cat[cat].append((s, p.timestamp, name, uuids[te.track_uuid]))
    assert not any(stacks.values()), "every slice is closed"
    assert set(flows_start) == set(flows_end) and max(flows_start.values(), default=1) == 1
    assert max(flows_end.values(), default=1) == 1
    return {"slices": slices, "tracks": uuids, "flows": len(flows_start), "names": interned["name"], "by_cat": by_cat,
            "instants": instants}


def test_nesting_puts_overlapping_slices_on_extra_tracks():
    """GIVEN slices that nest, touch, are empty, and one that overlaps without nesting
    WHEN levels and BEGIN/END lists are made THEN only the crossing slice moves to a second track, and each
    track's list is balanced with non-decreasing times."""
    start = np.array([0, 10, 10, 30, 30, 50, 55], dtype=np.int64)
    end = np.array([100, 30, 20, 30, 60, 70, 58], dtype=np.int64)
    order, level = nest_levels(start, end)
    assert level.tolist() == [0, 0, 0, 0, 0, 1, 0]
    for k in (0, 1):
        ev = begin_end(order[level[order] == k], start, end)
        assert [t for t, _, _ in ev] == sorted(t for t, _, _ in ev)
        depth = 0
        for _, typ, _ in ev:
            depth += 1 if typ == 1 else -1
            assert depth >= 0
        assert depth == 0 and len(ev) == 2 * int((level == k).sum())


def test_perfetto_export_of_a_real_gpu_trace(tmp_path, nccl_trace):
    """GIVEN the real A100 trace WHEN exported with --format perfetto (--op nccl)
    THEN the file decodes with the proto it was written with and follows the track-event rules; every complete
    event of the source (the timeline's and the whole-trace span the reader drops) is a slice, all 4,317
    launch→kernel / fwdbwd flows that have both ends in the source are flows, and the analysis tracks hold one
    slice per instance / hidden / exposed piece with the analysis's ns."""
    out, msg = export(tmp_path, str(nccl_trace), "--op", "nccl", "--format", "perfetto", name="t.pftrace")
    r = check_rules(decode(out))
    assert r["tracks"][1].startswith(MARK)
    tl = readers.load([nccl_trace]).timelines[0]
    a = analyze_timeline(tl, re.compile("nccl"))
    pcs = instance_pieces(a)
    added = [n for n in r["tracks"].values() if n.startswith("op nccl ")]
    got = Counter((s, e, n) for k, v in r["slices"].items() if k not in added and k != "steps" for s, e, n, _ in v)
    # every event comes back with its own start, end and name: the BEGIN/END pairs nest as written
    events, base, _ = chrome_tally.load(nccl_trace)
    assert got == chrome_tally.complete(events, base)
    assert sum(got.values()) == len(tl) + 1  # + "PyTorch Profiler (0)", category Trace
    assert r["flows"] == 4317
    inst = [s for k, v in r["slices"].items() if "instances" in k for s in v]
    hid = [s for k, v in r["slices"].items() if " hidden " in k for s in v]
    exp = [s for k, v in r["slices"].items() if " exposed " in k for s in v]
    assert len(inst) == len(a) and len(hid) == int(pcs.hidden.sum()) and len(exp) == int((~pcs.hidden).sum())
    assert sum(e - s for s, e, _, _ in hid) == int(a.hidden.sum())
    assert sorted(s for s, _, _, _ in inst) == sorted(a.inst.start.tolist())
    assert sum(g["hidden_ns"] for _, _, _, g in inst) == int(a.hidden.sum())
    assert len(r["slices"]["steps"]) == len(a.steps)


@pytest.mark.slow
def test_perfetto_export_of_run_with_log_and_of_two_ranks(tmp_path, nccl_trace):
    """GIVEN a recorded run with its overlay log, and two ranks of a real trace
    WHEN each is exported with --format perfetto
    THEN both follow the rules; the log's slices carry their step numbers; each rank has its own process track
    and the same slices as the other: every complete event of the source."""
    out, _ = export(tmp_path, str(RUN_WITH_LOG), "--format", "perfetto", name="run.pftrace")
    r = check_rules(decode(out))
    log = next(t for t in readers.load([RUN_WITH_LOG]).timelines if t.fmt == "overlay-log")
    from_log = [s for k, v in r["slices"].items() if k.startswith("overlay-log · ") for s in v]
    assert len(from_log) == len(log)
    assert Counter(g.get("step", -1) for _, _, _, g in from_log) == Counter(log.step.tolist())
    assert len([s for k, v in r["slices"].items() if "instances" in k for s in v]) == 33

    d = two_ranks(tmp_path, nccl_trace)
    out, _ = export(tmp_path, str(d), "--op", "nccl", "--format", "perfetto", name="two.pftrace")
    t = decode(out)
    r = check_rules(t)
    procs = {p.track_descriptor.uuid: p.track_descriptor.name for p in t.packet
             if p.HasField("track_descriptor") and p.track_descriptor.HasField("process")}
    assert sorted(n for n in procs.values() if not n.startswith("expo-prof")) == ["rank 0", "rank 1"]
    parent = {p.track_descriptor.uuid: p.track_descriptor.parent_uuid for p in t.packet if p.HasField("track_descriptor")}
    per_rank = Counter()
    for p in t.packet:
        if p.HasField("track_event") and p.track_event.type == BEGIN:
            per_rank[procs.get(parent.get(p.track_event.track_uuid))] += 1
    events, _, _ = chrome_tally.load(nccl_trace)
    assert per_rank["rank 0"] == per_rank["rank 1"] == sum(1 for e in events if e["ph"] == "X")
    assert r["flows"] == 2 * 4317
    res = run([d], Options.make(op="nccl"))
    assert sum(1 for k, v in r["slices"].items() if "instances" in k for _ in v) == res.document.summary.instances


def test_perfetto_output_guard(tmp_path, vllm_cpu_trace):
    """GIVEN an earlier perfetto export and a file that is not one WHEN exported over each THEN the export is
    replaced, the other file refused with one line (exit 2), and a .json name refused for --format perfetto."""
    out, _ = export(tmp_path, str(vllm_cpu_trace), "--format", "perfetto", name="a.pftrace")
    export(tmp_path, str(vllm_cpu_trace), "--format", "perfetto", name="a.pftrace")
    other = tmp_path / "b.pftrace"
    other.write_bytes(b"\x0a\x02hi")
    for target, why in ((other, "is not expo-prof output"), (tmp_path / "c.json", "ending in .pftrace")):
        res = subprocess.run([sys.executable, "-m", "expo_prof", "export", str(vllm_cpu_trace), "--format", "perfetto",
                              "-o", str(target)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and why in res.stderr and "Traceback" not in res.stderr, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    assert other.read_bytes() == b"\x0a\x02hi"
    assert decode(out).packet[0].track_descriptor.name.startswith(MARK)


def test_hand_encoded_varints_match_protobuf():
    """GIVEN integers across the uint64 range (edges of each varint length and random ones)
    WHEN encoded by the export's varint THEN the bytes are protobuf's own for a uint64 field."""
    from expo_prof.export.perfetto import _varint

    rng = np.random.default_rng(12)
    values = [0, 1, 127, 128, 16383, 16384, 2**32, 2**63 - 1, 2**64 - 1]
    values += [int(rng.integers(0, 2**62)) >> int(rng.integers(0, 62)) for _ in range(2000)]
    for v in values:
        assert pb.TracePacket(timestamp=v).SerializeToString() == b"\x40" + _varint(v), v

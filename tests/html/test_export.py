"""``expo-prof export`` (JSON): the source trace, whole, plus the analysis; read back, the same analysis."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import numpy as np
import pytest
from export_helpers import RUN_WITH_LOG, export, instances, two_ranks  # type: ignore[import-not-found]

from expo_prof import readers
from expo_prof.analysis import analyze
from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.export.chrome import ANALYSIS_PID, RANK_PID, UNCOUNTED_CAT
from expo_prof.export.raw_trace import us_to_ns
from expo_prof.export.tracks import ADDED_CAT
from expo_prof.analysis.overlap.pieces import instance_pieces


def _load(path):
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)


def _source(path):
    return json.loads(gzip.decompress(path.read_bytes()))


def _check_added(doc):
    """The events expo-prof writes itself are valid Trace Event Format, on named processes and threads."""
    evs = doc["traceEvents"]
    assert isinstance(evs, list) and evs
    named_p = {e["pid"] for e in evs if e.get("ph") == "M" and e.get("name") == "process_name"}
    named_t = {(e["pid"], e["tid"]) for e in evs if e.get("ph") == "M" and e.get("name") == "thread_name"}
    ours = [e for e in evs if e.get("ph") == "X" and e.get("cat") in (ADDED_CAT, UNCOUNTED_CAT)]
    for e in ours:
        assert isinstance(e["tid"], int) and isinstance(e["name"], str) and e["dur"] >= 0
        assert e["pid"] in named_p and (e["pid"], e["tid"]) in named_t
    assert doc["otherData"]["tool"].startswith("expo-prof")
    return ours


def test_export_keeps_every_source_event_flow_and_metadata(tmp_path, nccl_trace):
    """GIVEN the real A100 trace with 13,600 ac2g/fwdbwd flow events, deviceProperties and kernel args
    WHEN exported (--op nccl)
    THEN its events come first, exactly as in the source (flows, metadata, args: parsed JSON equal), every
    top-level key of the source is kept with its value, and the added tracks follow on their own pids with one
    slice per instance, hidden / exposed piece and step, whose args match the analysis."""
    out, msg = export(tmp_path, str(nccl_trace), "--op", "nccl")
    doc, src = _load(out), _source(nccl_trace)
    se = src["traceEvents"]
    assert doc["traceEvents"][: len(se)] == se
    assert sum(1 for e in se if e.get("ph") in ("s", "f")) == 13_600
    for k, v in src.items():
        if k not in ("traceEvents", "schemaVersion", "displayTimeUnit"):
            assert doc[k] == v, k
    assert doc["expoProf"]["sources"][0]["top"]["displayTimeUnit"] == src["displayTimeUnit"]
    assert "incl. 13600 flow events" in " ".join(msg.split()) and "+ 21 instances" in " ".join(msg.split())
    added = _check_added(doc)
    assert len(doc["traceEvents"]) == len(se) + len(added) + sum(
        1 for e in doc["traceEvents"][len(se):] if e["ph"] == "M")
    assert min(e["pid"] for e in added) >= ANALYSIS_PID > max(e["pid"] for e in se if isinstance(e.get("pid"), int))

    tl = readers.load([nccl_trace]).timelines[0]
    a = analyze_timeline(tl, re.compile("nccl"))
    pcs = instance_pieces(a)
    c = Counter(e["name"] for e in added)
    assert c["instance"] == len(a) == 21
    assert c["hidden"] == int(pcs.hidden.sum()) and c["exposed"] == int((~pcs.hidden).sum())
    assert sum(v for k, v in c.items() if k.startswith("step ")) == len(a.steps)
    assert sum(e["args"]["hidden_ns"] for e in added if e["name"] == "instance") == int(a.hidden.sum())
    # hidden slices add up (µs with ns decimals) to the hidden total
    assert sum(us_to_ns(e["dur"]) for e in added if e["name"] == "hidden") == int(a.hidden.sum())
    # every instance slice lies where the analysis put it, on the source's own clock
    base = doc["baseTimeNanoseconds"]
    starts = sorted(us_to_ns(e["ts"]) + base for e in added if e["name"] == "instance")
    assert starts == sorted(a.inst.start.tolist())


def test_reading_the_export_back_gives_the_same_analysis(tmp_path, nccl_trace, vllm_cpu_trace):
    """GIVEN two real traces (GPU with --op nccl; vLLM CPU with the default target)
    WHEN each is exported and the export read back through the pipeline
    THEN every instance comes back: same rank, step, start, total, hidden and exposed ns."""
    out, _ = export(tmp_path, str(nccl_trace), "--op", "nccl", name="nccl.json")
    assert instances([out], "nccl") == instances([nccl_trace], "nccl")
    out, _ = export(tmp_path, str(vllm_cpu_trace), name="vllm.json.gz")
    before = instances([vllm_cpu_trace])
    assert before["n"] == 32 and instances([out]) == before
    assert analyze(readers.load([out]).timelines).summary.rank_steps == analyze(readers.load([vllm_cpu_trace]).timelines).summary.rank_steps


def test_run_with_overlay_log_keeps_log_steps_and_reads_back_the_same(tmp_path):
    """GIVEN a recorded vLLM run with the overlay on (its Kineto trace and its overlay event log)
    WHEN exported
    THEN the trace's events are there unchanged; the log's events are there too, each with its step number in
    args, in the inert category (the trace was counted, the log only read for the wait); and the export read
    back gives the same instances, hidden and exposed ns as the run. With --source overlay-log the roles swap:
    the trace's events are kept (inert) and the log's 65 draws read back with their steps and ns."""
    out, _ = export(tmp_path, str(RUN_WITH_LOG))
    doc = _load(out)
    trace = next((RUN_WITH_LOG / "profiler").glob("rank0.*.pt.trace.json.gz"))
    se = _source(trace)["traceEvents"]
    assert doc["traceEvents"][: len(se)] == se
    log = next(t for t in readers.load([RUN_WITH_LOG]).timelines if t.fmt == "overlay-log")
    ours = _check_added(doc)
    from_log = [e for e in ours if e["cat"] == UNCOUNTED_CAT]
    assert len(from_log) == len(log)
    steps = Counter(e["args"].get("step", -1) for e in from_log)
    assert steps == Counter(log.step.tolist()) and len(steps) > 30
    assert {e["args"]["source_cat"] for e in from_log} <= {"user_annotation", "cpu_op", "expo_prof_other"}
    srcs = doc["expoProf"]["sources"]
    assert [(s["fmt"], s["counted"], s["passed_through"]) for s in srcs] == [("kineto", True, True),
                                                                              ("overlay-log", False, False)]
    before = instances([RUN_WITH_LOG])
    assert before["n"] == 33 and instances([out]) == before

    # --source overlay-log: the log counts (written from its timeline, its steps as ProfilerStep# spans) and the
    # trace is kept whole but inert; read back, the log's 65 draws (times on the trace's clock now).
    out, _ = export(tmp_path, str(RUN_WITH_LOG), "--source", "overlay-log", name="log-counted.json")
    doc = _load(out)
    inert = [e for e in doc["traceEvents"] if e.get("cat") == UNCOUNTED_CAT]
    assert len(inert) == sum(1 for e in se if e.get("ph") == "X")
    assert Counter(e["args"]["source_cat"] for e in inert) == Counter(e.get("cat") for e in se if e.get("ph") == "X")
    before = instances([RUN_WITH_LOG], source="overlay-log", start=False)
    assert before["n"] == 65 and instances([out], start=False) == before


def test_several_ranks_stay_apart_and_read_back_per_rank(tmp_path, nccl_trace):
    """GIVEN a folder with two ranks of a real GPU trace (rank 1: the same file relabelled)
    WHEN exported together (--op nccl)
    THEN no pid holds events of both ranks, each rank's processes carry a 'rank R' label, each rank's events
    are all there (same count as its source) and flow ids never join two ranks; read back, the export gives
    the same instances per rank as the two files."""
    d = two_ranks(tmp_path, nccl_trace)
    out, _ = export(tmp_path, str(d), "--op", "nccl")
    doc = _load(out)
    rank_pids = {int(k): v for k, v in doc["expoProf"]["rank_pids"].items()}
    assert sorted(set(rank_pids.values())) == [0, 1]
    assert all(RANK_PID + r * 1000 <= p < RANK_PID + (r + 1) * 1000 for p, r in rank_pids.items())
    src = _source(nccl_trace)["traceEvents"]
    # (less the process_labels expo-prof adds to processes whose source wrote none: exactly "rank R")
    per_rank = Counter(rank_pids[e["pid"]] for e in doc["traceEvents"] if e.get("pid") in rank_pids
                       and not (e.get("name") == "process_labels" and re.fullmatch(r"rank \d+", e["args"]["labels"])))
    assert per_rank == {0: len(src), 1: len(src)}
    labels = {e["pid"]: e["args"]["labels"] for e in doc["traceEvents"] if e.get("name") == "process_labels"}
    assert set(labels) >= set(rank_pids) and all(labels[p].startswith(f"rank {r}") for p, r in rank_pids.items())
    flows = {}
    for e in doc["traceEvents"]:
        if e.get("ph") in ("s", "f") and e.get("pid") in rank_pids:
            flows.setdefault((e["cat"], e["id"]), set()).add(rank_pids[e["pid"]])
    assert flows and all(len(r) == 1 for r in flows.values())
    assert len(flows) == 2 * len({(e["cat"], e["id"]) for e in src if e.get("ph") in ("s", "f")})
    back = readers.load([out]).timelines
    assert sorted(t.rank for t in back) == [0, 1]
    before = instances([d], "nccl")
    assert before["n"] == 42 and instances([out], "nccl") == before


@pytest.mark.slow
def test_export_of_recorded_run_gz(tmp_path, run_on):
    """GIVEN a recorded run directory WHEN exported to .json.gz THEN the file is gzip JSON with the instance track."""
    out, _ = export(tmp_path, str(run_on), name="annotated.json.gz")
    doc = _load(out)
    _check_added(doc)
    n = analyze(readers.load([run_on]).timelines).summary.instances
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "instance") == n > 0
    assert np.isfinite(doc["baseTimeNanoseconds"])


def test_sources_without_their_own_bytes_are_written_from_the_timeline(tmp_path, realtraces, nccl_trace):
    """GIVEN an Ascend kernel_details.csv (--op hcom) and a real GPU trace cut at 70 % (invalid JSON the reader
    repairs) WHEN each is exported
    THEN the CSV's events are written from its timeline and read back with the same instances; the cut trace
    is exported too, with one warning saying its events come from the timeline, and reads back the same."""
    csv = realtraces / "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    out, _ = export(tmp_path, str(csv), "--op", "hcom", name="csv.json")
    doc = _load(out)
    assert doc["expoProf"]["sources"][0]["passed_through"] is False
    before = instances([csv], "hcom")
    assert before["n"] == 4 and instances([out], "hcom") == before

    raw = gzip.decompress(nccl_trace.read_bytes())
    cut = tmp_path / "cut.pt.trace.json"
    cut.write_bytes(raw[: int(len(raw) * 0.7)])
    out, msg = export(tmp_path, str(cut), "--op", "nccl", name="cut-export.json")
    text = " ".join(msg.split())
    assert text.count("not plain valid JSON") == 1 and "written from the timeline" in text
    before = instances([cut], "nccl")
    assert before["n"] > 0 and instances([out], "nccl") == before

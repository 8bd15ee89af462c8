"""``expo-prof export``: a valid Chrome trace that reloads through the readers with the same analysis."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import numpy as np

from expo_prof import readers
from expo_prof.analysis import analyze
from expo_prof.analysis.hidden import analyze_timeline
from expo_prof.cli.main import cli
from expo_prof.export.chrome import ANALYSIS_PID
from expo_prof.export.tracks import ADDED_CAT
from expo_prof.html.segments import instance_pieces


def _export(tmp_path, src, *args, name="annotated.json"):
    from click.testing import CliRunner

    out = tmp_path / name
    r = CliRunner().invoke(cli, ["export", str(src), "-o", str(out), *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    raw = gzip.decompress(out.read_bytes()) if name.endswith(".gz") else out.read_bytes()
    return out, json.loads(raw)


def _check_chrome_trace(doc):
    """The Trace Event Format as Perfetto / chrome://tracing read it."""
    evs = doc["traceEvents"]
    assert isinstance(evs, list) and evs
    named_p = {e["pid"] for e in evs if e["ph"] == "M" and e["name"] == "process_name"}
    named_t = {(e["pid"], e["tid"]) for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in evs:
        assert isinstance(e["ph"], str) and isinstance(e["name"], str)
        if e["ph"] in ("X", "M"):
            assert isinstance(e["pid"], int)
        if e["ph"] == "X" and e.get("cat") in (ADDED_CAT, "expo_prof_source"):
            assert isinstance(e["tid"], int) and e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["cat"], str)
            assert e["pid"] in named_p and (e["pid"], e["tid"]) in named_t


def test_export_of_real_vllm_trace_reloads_with_same_analysis(tmp_path, vllm_cpu_trace):
    """GIVEN the real vLLM CPU trace WHEN exported THEN it is a valid Chrome trace (plain json parse), and reading it
    back through expo_prof.readers gives the same instances, hidden/exposed totals and steps."""
    out, doc = _export(tmp_path, vllm_cpu_trace)
    _check_chrome_trace(doc)
    before = analyze(readers.load([vllm_cpu_trace]).timelines)
    after = analyze(readers.load([out]).timelines)
    for f in ("instances", "total_ns", "hidden_ns", "exposed_ns", "steps", "forward_ns"):
        assert getattr(after.summary, f) == getattr(before.summary, f), f


def test_added_tracks_hold_the_right_counts(tmp_path, nccl_trace):
    """GIVEN a real GPU trace with partly hidden NCCL kernels (--op nccl) WHEN exported THEN the added tracks hold one
    slice per instance, per hidden and exposed piece and per step, with args that match the analysis; and the
    re-read trace analyses the same (the added tracks are not counted)."""
    out, doc = _export(tmp_path, nccl_trace, "--op", "nccl")
    _check_chrome_trace(doc)
    tl = readers.load([nccl_trace]).timelines[0]
    a = analyze_timeline(tl, re.compile("nccl"))
    pcs = instance_pieces(a)
    added = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] >= ANALYSIS_PID]
    assert all(e["cat"] == ADDED_CAT for e in added)
    c = Counter(e["name"] for e in added)
    assert c["instance"] == len(a)
    assert c["hidden"] == int(pcs.hidden.sum()) and c["exposed"] == int((~pcs.hidden).sum())
    assert sum(v for k, v in c.items() if k.startswith("step ")) == len(a.steps)
    hid = sum(e["args"]["hidden_ns"] for e in added if e["name"] == "instance")
    assert hid == int(a.hidden.sum())
    # hidden slices add up (µs with ns decimals) to the hidden total
    assert round(sum(e["dur"] for e in added if e["name"] == "hidden") * 1000) == int(a.hidden.sum())
    again = analyze_timeline(readers.load([out]).timelines[0], re.compile("nccl"))
    assert len(again) == len(a) and np.array_equal(np.sort(again.hidden), np.sort(a.hidden))


def test_export_of_recorded_run_gz(tmp_path, run_on):
    """GIVEN a recorded run directory WHEN exported to .json.gz THEN the file is gzip JSON with the instance track."""
    out, doc = _export(tmp_path, run_on, name="annotated.json.gz")
    _check_chrome_trace(doc)
    n = analyze(readers.load([run_on]).timelines).summary.instances
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "instance") == n > 0

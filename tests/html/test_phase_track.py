"""The switchback phase track of the timeline page and of both exports, and the page's header (issue 39, items 6, 8).

GIVEN the committed real switchback runs on the vLLM CPU server (traces/samples/tiny-cpu-switchback: a run of a
fixed length; tiny-cpu-sequential: one that decided as it went) WHEN the timeline page's data and the Perfetto
and JSON exports are built THEN each holds one phase track whose slices are the blocks of consecutive steps in
one phase: their boundaries are the steps' phase changes and their times the first step's window start and the
last step's window end, both worked out here from the overlay event log's lines (``json``, not the reader), and
each is named by what its arm runs in the terminal's words (``terminal/saving.py`` ``arm_words``). A run that
is no switchback (traces/samples/tiny-cpu-off-on/02-on) has none, and its page's header is as before.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import msgspec
import pytest
from export_helpers import export  # type: ignore[import-not-found]
from html_helpers import SAMPLES, page_data  # type: ignore[import-not-found]
from test_export_perfetto import check_rules, decode  # type: ignore[import-not-found]

from expo_prof import readers
from expo_prof.html.build import timeline_document
from expo_prof.html.timeline_data import arm_label, build_payload, phase_blocks
from expo_prof.pipeline import Options, run
from expo_prof.terminal.saving import arm_words

SWITCHBACK_RUNS = ("tiny-cpu-switchback", "tiny-cpu-sequential")
NOT_SWITCHBACK = SAMPLES / "tiny-cpu-off-on" / "02-on"
WINDOW_KEYS = ("fwd", "exp", "wait", "sample")  # the step line's timed windows (docs/event-log.md)


def log_lines(path: Path) -> tuple[dict, list[dict]]:
    """The event log's header and its step lines, read with ``json``."""
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return next(x for x in lines if x["type"] == "header"), [x for x in lines if x["type"] == "step"]


def expected_blocks(log: Path, shift: int = 0) -> list[tuple[str, int, int, int, int]]:
    """(phase, start, end, first step, last step) of every block, from the log file alone: a step's window is
    its earliest window start to its latest window end (``t0_ns`` + the offsets of its timed windows), clipped to
    the next step's start; a block is a run of consecutive steps (in time) of one phase. ``shift``: ns onto the
    output's clock."""
    _, steps = log_lines(log)
    wins = []
    for s in steps:
        w = [s[k] for k in WINDOW_KEYS if s.get(k)]
        wins.append([s["t0_ns"] + min(a for a, _ in w), s["t0_ns"] + max(b for _, b in w), s["step"], s["phase"]])
    wins.sort(key=lambda w: w[0])
    for w, nxt in zip(wins, wins[1:]):
        w[1] = max(min(w[1], nxt[0]), w[0])
    blocks: list[list] = []
    for a, b, sid, ph in wins:
        if blocks and blocks[-1][0] == ph:
            blocks[-1][2], blocks[-1][4] = b, sid
        else:
            blocks.append([ph, a, b, sid, sid])
    return [(ph, a + shift, b + shift, f, la) for ph, a, b, f, la in blocks]


def the_log(d: Path) -> Path:
    (log,) = (d / "overlay").glob("expo-prof-events-*.jsonl")
    return log


def terminal_label(d: Path, phase: str) -> str:
    """How the terminal's saving table names ``phase`` of the run in ``d``: ``off (engine as shipped)``."""
    sv = run([d]).recordings[0].savings[0]
    return f"{phase} ({arm_words(sv, phase)})"


@pytest.mark.parametrize("name", SWITCHBACK_RUNS)
def test_timeline_phase_track_is_the_logs_blocks(name):
    """GIVEN a real switchback run WHEN its timeline page is built THEN the page's data holds one phase row whose
    blocks are the log's phase runs, at the log's step windows, named as the terminal names each arm; the header's
    answer is the saving line every command prints."""
    d = SAMPLES / name
    doc = timeline_document([d])
    data = page_data(doc.text)
    (row,) = [i for i, ln in enumerate(data["lanes"]) if ln["kind"] == "phase"]
    assert data["lanes"][row]["label"] == "rank 0 · switchback phase"
    ph = data["phase"]
    origin = int(data["origin_ns"])
    got = [(data["phases"][p], origin + s, origin + s + du, f, la)
           for p, s, du, f, la in zip(ph["phase"], ph["start"], ph["dur"], ph["first"], ph["last"])]
    want = expected_blocks(the_log(d))
    assert got == want
    assert len(want) > 20 and {w[0] for w in want} == {"off", "on"}  # the run alternated, many times
    assert set(ph["lane"]) == {row} and list(ph["n"]) == [la - f + 1 for _, _, _, f, la in want]
    labels = {data["phases"][p]: data["names"][n] for p, n in zip(ph["phase"], ph["name"])}
    assert labels == {p: terminal_label(d, p) for p in ("off", "on")}
    assert labels == {"off": "off (engine as shipped)", "on": "on (overlay)"}  # two arms: off is the engine as shipped
    rr = run([d]).recordings[0]
    assert data["answer"] == rr.saving_line and data["answer"].startswith(f"saving (switchback): {rr.savings[0].decision}")


@pytest.mark.parametrize("name", SWITCHBACK_RUNS)
def test_perfetto_phase_track_is_the_logs_blocks(tmp_path, name):
    """GIVEN a real switchback run WHEN exported to Perfetto and decoded with the proto THEN the analysis process
    holds a ``switchback phase`` track whose slices are the log's blocks (monotonic ns: the log is the only
    clock), each named by its arm with its phase and steps as args."""
    d = SAMPLES / name
    out, _ = export(tmp_path, str(d), "--format", "perfetto", name="run.pftrace")
    got = check_rules(decode(out))["slices"]["switchback phase"]
    want = expected_blocks(the_log(d))
    assert [(a["phase"], s, e, a["first_step"], a["last_step"]) for s, e, _, a in got] == want
    assert [a["steps"] for _, _, _, a in got] == [la - f + 1 for _, _, _, f, la in want]
    label = {p: terminal_label(d, p) for p in ("off", "on")}
    assert [n for _, _, n, _ in got] == [label[a["phase"]] for _, _, _, a in got]


def test_json_export_phase_track(tmp_path):
    """GIVEN the sequential run WHEN exported as Chrome JSON THEN the analysis process has a thread named
    ``switchback phase`` whose X events are the log's blocks (µs from the export's base)."""
    d = SAMPLES / "tiny-cpu-sequential"
    out, _ = export(tmp_path, str(d), name="run.json")
    doc = json.loads(out.read_text())
    (meta,) = [e for e in doc["traceEvents"] if e.get("ph") == "M" and e.get("name") == "thread_name"
               and e["args"]["name"] == "switchback phase"]
    evs = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e["pid"] == meta["pid"] and e["tid"] == meta["tid"]]
    base = int(doc["baseTimeNanoseconds"])
    got = [(e["args"]["phase"], round(e["ts"] * 1000) + base, round((e["ts"] + e["dur"]) * 1000) + base,
            e["args"]["first_step"], e["args"]["last_step"]) for e in sorted(evs, key=lambda e: e["ts"])]
    assert got == expected_blocks(the_log(d))
    assert {e["cat"] for e in evs} == {"expo_prof"}  # inert: reading the export back counts nothing of it


def test_no_phase_track_without_switchback(tmp_path):
    """GIVEN an overlay-on run that is no switchback (a profiler trace and a schema-1 log) WHEN its page and its
    Perfetto export are built THEN neither has a phase track, and the header is the headline and the saving line
    as before (no answer leads)."""
    doc = timeline_document([NOT_SWITCHBACK])
    data = page_data(doc.text)
    assert data["answer"] is None and not data["phase"]["start"]
    assert all(ln["kind"] != "phase" for ln in data["lanes"])
    out, _ = export(tmp_path, str(NOT_SWITCHBACK), "--format", "perfetto", name="run.pftrace")
    assert "switchback phase" not in check_rules(decode(out))["slices"]


def switchback_beside_trace(tmp_path: Path) -> Path:
    """A CONSTRUCTED input: the real overlay-on run 02-on (a Kineto trace and the overlay log of its process)
    with its log rewritten into a switchback log — schema 2, ``mode`` switchback, blocks of 2 steps, the blocks'
    phases off, on, on, off, off … as the overlay runs them. No committed run holds a profiler trace of a
    switchback run; this one has a trace that is counted and a log read beside it."""
    d = tmp_path / "sb-with-trace"
    shutil.copytree(NOT_SWITCHBACK, d)
    log = the_log(d)
    out = []
    for line in log.read_text().splitlines():
        x = json.loads(line)
        if x["type"] == "header":
            x.update(schema=2, mode="switchback", block_steps=2)
        elif x["type"] == "step":
            block = x["step"] // 2
            x.update(block=block, phase=("off", "on")[(block % 2) ^ (block // 2 % 2)])
        out.append(json.dumps(x))
    log.write_text("\n".join(out) + "\n")
    return d


def test_phase_track_from_the_log_beside_a_trace(tmp_path):
    """GIVEN a switchback log read beside a counted Kineto trace WHEN the Perfetto export and the page (given the
    recording's Timelines) are built THEN the phase track is the log's blocks on the trace's epoch clock (the
    log's monotonic times + the header's wall − mono), and the page keeps the blocks inside its time range."""
    d = switchback_beside_trace(tmp_path)
    header, _ = log_lines(the_log(d))
    want = expected_blocks(the_log(d), header["wall_ns"] - header["mono_ns"])
    out, _ = export(tmp_path, str(d), "--format", "perfetto", name="run.pftrace")
    got = check_rules(decode(out))["slices"]["switchback phase"]
    assert [(a["phase"], s, e, a["first_step"], a["last_step"]) for s, e, _, a in got] == want
    assert {n for _, _, n, _ in got} == {"off (engine as shipped)", "on (overlay)"}
    rr = run([d], Options.make()).recordings[0]
    assert [a.tl.fmt for a in rr.parts] == ["kineto"]  # the trace is counted, the log only read beside it
    data = build_payload(rr.parts, timelines=rr.timelines, run={"saving_line": rr.saving_line, "headline": ""})
    ph, origin = data["phase"], int(data["origin_ns"])
    page = [(data["phases"][p], origin + s, origin + s + du) for p, s, du in zip(ph["phase"], ph["start"], ph["dur"])]
    inside = [w[:3] for w in want if w[1] < origin + data["span_ns"] and w[2] > origin]
    assert page == inside and len(inside) >= 2
    # Without the Timelines the counted trace alone says nothing of phases: no row, no answer leading.
    bare = build_payload(rr.parts, run={"saving_line": rr.saving_line, "headline": ""})
    assert not len(bare["phase"]["start"]) and bare["answer"] is None


@pytest.mark.parametrize("arms", [("off", "on"), ("off", "on", "native")])
def test_arm_labels_are_the_terminals(arms):
    """GIVEN a real run's Saving, with two arms and with three WHEN the page labels each phase THEN the label is
    the terminal's ``arm (words)`` (the page's layer may not import the terminal's table: a copy, held equal here)."""
    sv = msgspec.structs.replace(run([SAMPLES / "tiny-cpu-switchback"]).recordings[0].savings[0], arms=list(arms))
    for p in arms:
        assert arm_label(p, len(arms)) == f"{p} ({arm_words(sv, p)})"


def test_decoded_json_export_readback_ignores_phase_track(tmp_path):
    """GIVEN the switchback run exported as JSON WHEN read back by ``analyze`` THEN the instances are the
    input's: the phase slices (category ``expo_prof``) count as nothing."""
    d = SAMPLES / "tiny-cpu-switchback"
    out, _ = export(tmp_path, str(d), name="run.json.gz")
    assert gzip.decompress(out.read_bytes()).count(b'"switchback phase"') == 1
    before = run([d]).document.recordings[0].summary
    after = run([out]).document.recordings[0].summary
    assert before is not None and after is not None and after.instances == before.instances


def test_blocks_break_where_the_phase_changes_or_is_unknown(tmp_path):
    """GIVEN a small event log written here — steps 0–1 off (step 1's window runs past step 2's start), step 2
    on, step 3 in no block, steps 4–5 on — read by the real reader WHEN its phase blocks are made THEN three
    blocks: off 0–1 ending where step 2 starts (the clip), on 2, and on 4–5 (a step without a phase ends a block:
    the blocks never span it)."""
    log = tmp_path / "expo-prof-events-1.jsonl"
    head = {"type": "header", "schema": 2, "pid": 1, "rank": 0, "backend": "cpu", "lane": "thread", "mode": "switchback",
            "block_steps": 2, "clock": "monotonic", "mono_ns": 0, "wall_ns": 0}
    rows = [(0, "off", 0, 1000, 100), (1, "off", 0, 1200, 500), (2, "on", 1, 1500, 100), (3, None, -1, 1700, 100),
            (4, "on", 1, 1900, 100), (5, "on", 2, 2100, 100)]
    steps = [{"type": "step", "step": s, "rank": 0, "t0_ns": t0, "fwd": [0, dur], "launched": False, "reqs": 1,
              "tokens": 1, **({"phase": ph, "block": b} if ph else {})} for s, ph, b, t0, dur in rows]
    log.write_text("\n".join(json.dumps(x) for x in [head, *steps]) + "\n")
    (tl,) = readers.load([log]).timelines
    b = phase_blocks(tl)
    assert b is not None
    assert list(zip(b.phase, b.start.tolist(), b.end.tolist(), b.first.tolist(), b.last.tolist(), b.n.tolist())) == [
        ("off", 1000, 1500, 0, 1, 2), ("on", 1500, 1600, 2, 2, 1), ("on", 1900, 2200, 4, 5, 2)]
    assert b.label == ["off (engine as shipped)", "on (overlay)", "on (overlay)"]

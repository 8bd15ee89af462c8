"""The overlay's own event log (docs/event-log.md), written by the real writer overlay.events.EventLog."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from expo_prof.errors import BadInput
from expo_prof.readers import load
from expo_prof.timeline import Kind, LaneKind
from overlay.events import EventLog
from expo_prof.timeline import overlay_log


def _write_log(out, steps, close=True):
    log = EventLog(str(out))
    log.configure(backend="cpu", lane="thread", rank=3)
    for rec in steps:
        log.step(rec)
    if close:
        log.close()
    else:
        assert log.drain(10)  # a live log: lines are in the file once the writer thread drained
    return log.path


def _step(i, t0, launched=True, used=True, fallback=None):
    return {"step": i, "rank": 3, "rows": 4, "vocab": 2048, "dtype": "float32", "launched": launched, "used": used,
            "fallback": fallback, "t0_ns": t0, "fwd": [100, 5000], "exp": [200, 1200] if launched else None,
            "wait": [5100, 5100 + i] if launched else None, "timing": "host"}


def test_overlay_log_lanes_steps_and_meta(tmp_path):
    """GIVEN a log written by EventLog with 3 steps (one greedy-only, nothing launched)
    WHEN loaded THEN there are three OVERLAY lanes, events at t0 + offset named expo_prof::*, step ids in
    Timeline.step, and the per-step records plus header and summary in its OverlayLog (timeline.overlay_log)."""
    steps = [_step(0, 10_000), _step(1, 20_000), _step(2, 30_000, launched=False, used=False, fallback="all_greedy")]
    path = _write_log(tmp_path, steps)
    res = load([tmp_path])
    tl = res.timelines[0]
    assert tl.fmt == "overlay-log" and tl.rank == 3 and tl.backend == "cpu" and res.warnings == []
    assert [ln.name for ln in tl.lanes] == ["overlay forward", "overlay exponential", "overlay wait",
                                            "overlay sampler", "overlay model"]
    assert all(ln.kind == LaneKind.OVERLAY for ln in tl.lanes)
    assert (tl.kind == Kind.OVERLAY).all()
    names = [tl.names[i] for i in tl.name]
    # … and the model's busy window per step: forward start until the wait starts (or the forward ends)
    assert Counter(names) == {"expo_prof::forward": 3, "expo_prof::exponential": 2, "expo_prof::wait": 2,
                              "overlay model busy": 3}
    busy = [i for i, n in enumerate(names) if n == "overlay model busy"]
    assert sorted(zip(tl.start[busy].tolist(), tl.dur[busy].tolist())) == [
        (10_100, 5000), (20_100, 5000), (30_100, 4900)]
    fwd = [i for i, n in enumerate(names) if n == "expo_prof::forward"]
    assert tl.start[fwd].tolist() == [10_100, 20_100, 30_100] and tl.dur[fwd].tolist() == [4900] * 3
    assert sorted(tl.step[fwd].tolist()) == [0, 1, 2]
    ov = overlay_log(tl)
    lines = [json.loads(x) for x in open(path)]
    assert ov.header == lines[0] and ov.summary == lines[-1] and ov.summary_from_file
    assert ov.steps["launched"].tolist() == [True, True, False]
    assert ov.steps["fallback"].tolist() == [None, None, "all_greedy"]
    assert ov.steps["exp_ns"].tolist() == [1000, 1000, -1]
    assert ov.recomputed["fallbacks"] == lines[-1]["fallbacks"] == {"all_greedy": 1}
    assert ov.wall_minus_mono_ns == lines[0]["wall_ns"] - lines[0]["mono_ns"]


def test_step_lines_left_out_by_the_size_cap_are_a_warning(tmp_path):
    """GIVEN a log written under a size cap its steps exceed
    WHEN loaded THEN the written steps are read, the summary keeps every step, and one warning says how many are missing."""
    log = EventLog(str(tmp_path), max_bytes=2_000)
    log.configure(backend="cpu", lane="thread", rank=3)
    for i in range(40):
        log.step(_step(i, 1000 * (i + 1)))
    log.close()
    res = load([log.path])
    ov = overlay_log(res.timelines[0])
    written = len(ov.steps["step"])
    assert ov.summary["steps"] == 40 and 0 < written < 40
    assert ov.summary["sampled_out"] == 40 - written
    assert [w for w in res.warnings if "left out by the size cap" in w] == [
        f"{log.path}: {40 - written} step line(s) left out by the size cap (EXPO_PROF_LOG_MAX_MB) and 0 dropped "
        f"(writer queue full); per-step figures cover the {written} written"
    ]


def test_torn_last_line_is_a_warning(tmp_path):
    """GIVEN a log whose process was killed mid-line (no summary, last line cut)
    WHEN loaded THEN the complete steps are read, and one warning each names the torn line and the missing summary."""
    path = _write_log(tmp_path, [_step(i, 1000 * (i + 1)) for i in range(4)], close=False)
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) - 25])  # cut inside the last step line
    res = load([path])
    tl = res.timelines[0]
    assert len(overlay_log(tl).steps["step"]) == 3
    assert any("last line is incomplete" in w for w in res.warnings)
    assert any("no summary line" in w for w in res.warnings)
    assert overlay_log(tl).summary["steps"] == 3


def test_unknown_schema_is_refused_naming_the_version(tmp_path):
    """GIVEN a log whose header says schema 99 WHEN loaded THEN BadInput names that version and the supported one."""
    path = _write_log(tmp_path, [_step(0, 1000)])
    lines = open(path).read().splitlines()
    head = json.loads(lines[0])
    head["schema"] = 99
    lines[0] = json.dumps(head)
    open(path, "w").write("\n".join(lines) + "\n")
    with pytest.raises(BadInput, match=r"schema 99 is not supported .*schemas 1, 2"):
        load([path])


def test_log_without_header_is_bad_input(tmp_path):
    """GIVEN an event-log file that starts with a step line WHEN loaded THEN BadInput says the header is missing."""
    p = tmp_path / "expo-prof-events-h-1.jsonl"
    p.write_text(json.dumps({"type": "step", **_step(0, 1)}) + "\n")
    with pytest.raises(BadInput, match="does not start with a header"):
        load([p])
    p.write_text("")
    with pytest.raises(BadInput, match="empty event log"):
        load([p])


def test_device_timing_windows_are_relative_to_t0(tmp_path):
    """GIVEN device-timed steps (offsets from an anchor at t0_ns) WHEN loaded THEN windows are t0 + offset and
    the per-step wait durations are exact."""
    steps = [dict(_step(i, 1_000_000 * i), timing="device", wait=[7000, 7000 + 13 * i]) for i in range(5)]
    _write_log(tmp_path, steps)
    tl = load([tmp_path]).timelines[0]
    wait = np.array([tl.names[i] == "expo_prof::wait" for i in tl.name])
    assert tl.dur[wait].tolist() == [13 * i for i in range(5)]
    assert tl.start[wait].tolist() == [1_000_000 * i + 7000 for i in range(5)]
    assert overlay_log(tl).steps["timing"].tolist() == ["device"] * 5


def test_q_memory_figures_are_read_and_older_logs_lack_only_the_new_one(tmp_path):
    """GIVEN a log whose summary has every q memory figure, the same log as written before
    q_block_peak_bytes existed, and a schema-1 log with no q figure at all
    WHEN loaded THEN the figures are in OverlayLog.q_memory, each missing one None (never 0)."""
    new, old, first = (tmp_path / name for name in ("new", "old", "first"))
    log = EventLog(str(new))
    log.configure(backend="cuda", lane="stream", rank=3)
    log.step(_step(0, 10_000))
    log.q_max_bytes, log.q_peak_bytes, log.q_reserved_bytes, log.q_block_peak_bytes = 100, 100, 200, 200
    log.close()
    lines = [json.loads(x) for x in open(log.path)]
    for out, schema, drop in ((old, 2, ("q_block_peak_bytes",)),
                              (first, 1, ("q_max_bytes", "q_peak_bytes", "q_reserved_bytes", "q_block_peak_bytes"))):
        out.mkdir()
        header, summary = dict(lines[0], schema=schema), {k: v for k, v in lines[-1].items() if k not in drop}
        (out / "expo-prof-events-h-1.jsonl").write_text(
            "".join(json.dumps(obj) + "\n" for obj in [header, *lines[1:-1], summary]))
    got = [overlay_log(load([d]).timelines[0]).q_memory for d in (new, old, first)]
    assert got[0] == {"q_max_bytes": 100, "q_peak_bytes": 100, "q_reserved_bytes": 200, "q_block_peak_bytes": 200}
    assert got[1] == {"q_max_bytes": 100, "q_peak_bytes": 100, "q_reserved_bytes": 200, "q_block_peak_bytes": None}
    assert got[2] == dict.fromkeys(got[0])

"""The overlay event log's sampler waits placed onto a profiler trace's steps by clock.

Real data: traces/samples/tiny-cpu-off-on/02-on is a recording of vLLM's CPU
server with the overlay on: a Kineto trace of rank 0 (with the overlay's
``expo_prof::exponential`` / ``::forward`` / ``::wait`` spans, recorded by its
profiler patch) and the overlay event log of the same process. The trace
covers 33 steps; the log covers all 65 steps of the run.

Ground truth: the trace's own ``expo_prof::wait`` span of each step. The
overlay writes it with ``record_function`` *around* ``lane.wait()``, which
reads ``time.monotonic_ns()`` on entry and exit for the log — so each log wait
lies inside the span of the same step, and is shorter than it by the
profiler's own overhead (about 30–50 µs a span here). The log's value and the
span's are therefore two measurements of one wait, not equal numbers; what
must hold step for step is that the step's wait comes from exactly the log
window that lies inside that step's span, with its duration unchanged (no
tolerance: durations are the log's own integers, only their placement uses
the clock mapping).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from expo_prof import readers
from expo_prof.analysis import analyze
from expo_prof.analysis.targets import SPAN_WAIT

RUN = Path(__file__).resolve().parents[2] / "traces" / "samples" / "tiny-cpu-off-on" / "02-on"
TRACE = next((RUN / "profiler").glob("rank0.*.pt.trace.json.gz"))
LOG = next((RUN / "overlay").glob("expo-prof-events-*.jsonl"))


def copy_trace_without(dst: Path, names: set[str]) -> Path:
    """The real trace with the events named ``names`` removed, numbers kept byte-exact (no float round trip)."""
    doc = json.loads(gzip.decompress(TRACE.read_bytes()), parse_float=lambda s: f"@@num@@{s}@@")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") not in names]
    text = re.sub(r'"@@num@@([^@"]*)@@"', r"\1", json.dumps(doc))
    out = dst / "rank0.trace.pt.trace.json.gz"
    out.write_bytes(gzip.compress(text.encode()))
    return out


def copy_log(dst: Path, edit=None) -> Path:
    """The real overlay log, optionally with ``edit(obj)`` applied to every line's object."""
    lines = [json.loads(ln) for ln in LOG.read_text().splitlines() if ln.strip()]
    if edit is not None:
        for obj in lines:
            edit(obj)
    out = dst / LOG.name
    out.write_text("".join(json.dumps(o) + "\n" for o in lines))
    return out


def log_steps() -> tuple[list[dict], int]:
    """The log's step lines that have a wait window, and the header's wall − monotonic offset."""
    lines = [json.loads(ln) for ln in LOG.read_text().splitlines() if ln.strip()]
    head = lines[0]
    return [o for o in lines if o.get("type") == "step" and o.get("wait")], head["wall_ns"] - head["mono_ns"]


def run_analysis(*paths: Path):
    loaded = readers.load(list(paths))
    return analyze(loaded.timelines, warnings=loaded.warnings)


@pytest.fixture(scope="module")
def original():
    """The trace alone, as recorded: its steps, and its expo_prof::wait spans in time order."""
    result = analyze(readers.load([TRACE]).timelines)
    tl = readers.read_file(TRACE)
    rows = [i for i in range(len(tl)) if tl.names[tl.name[i]] == SPAN_WAIT]
    spans = sorted((int(tl.start[i]), int(tl.start[i] + tl.dur[i])) for i in rows)
    return result, spans


def _paired(spans: list[tuple[int, int]]) -> list[dict]:
    """For each trace wait span (in time order), the one log step line whose wait lies inside it."""
    steps, off = log_steps()
    out = []
    for s, e in spans:
        inside = [o for o in steps if s <= o["t0_ns"] + o["wait"][0] + off and o["t0_ns"] + o["wait"][1] + off <= e]
        assert len(inside) == 1, (s, e, len(inside))
        out.append(inside[0])
    return out


def test_log_waits_fill_the_steps_of_a_trace_without_wait_spans(tmp_path, original):
    """GIVEN the real trace with its expo_prof::wait events removed, and the real overlay log of the run
    WHEN both are analysed together
    THEN every step of the trace gets, step for step, the log wait that lies inside the step's original
    expo_prof::wait span (its duration exactly, shorter than the span); instances and forward are those of
    the trace alone; the 32 log waits of unprofiled steps count in the rank's wait and are named in a warning.
    """
    orig, spans = original
    orig_steps = [s for s in orig.steps if s.step is not None]
    # The ground truth is one span per step, in step order.
    assert len(spans) == len(orig_steps) == 33
    assert [s.wait_ns for s in orig_steps] == [e - s for s, e in spans]
    truth = _paired(spans)

    result = run_analysis(copy_trace_without(tmp_path, {SPAN_WAIT}), copy_log(tmp_path))

    got = [s for s in result.steps if s.step is not None]
    assert [s.step for s in got] == [s.step for s in orig_steps]
    assert [s.wait_ns for s in got] == [o["wait"][1] - o["wait"][0] for o in truth]
    assert all(0 < g.wait_ns < o.wait_ns for g, o in zip(got, orig_steps))
    for field in ("instances", "total_ns", "hidden_ns", "forward_ns", "start_ns", "end_ns"):
        assert [getattr(s, field) for s in got] == [getattr(s, field) for s in orig_steps], field
    assert result.summary.per_step.wait_ns.n == 33
    assert result.summary.per_step.wait_ns.max == max(s.wait_ns for s in got)

    every_log_wait = sum(o["wait"][1] - o["wait"][0] for o in log_steps()[0])
    assert result.ranks[0].wait_ns == every_log_wait
    assert result.ranks[0].fmt == "kineto" and result.ranks[0].forward_source == "expo_prof::forward"
    assert any("sampler wait per step taken from the overlay event log" in w for w in result.warnings)
    assert any("32 of 65 wait window(s)" in w and "in no step" in w for w in result.warnings)
    assert not any("summed per rank only" in w or "ignored overlay-log" in w for w in result.warnings)
    # AND the warnings name the rank, and the log that gave the waits is not listed as an input left uncounted
    assert result.warnings[0].startswith("rank 0: sampler wait per step taken from the overlay event log")
    assert result.info == []


def test_log_forward_fills_the_steps_when_the_trace_has_no_overlay_forward_span(tmp_path, original):
    """GIVEN the real trace without its expo_prof::wait and expo_prof::forward events, and the real log
    WHEN both are analysed together
    THEN each step's forward is the log's forward window of the same log step (the one whose wait lies in
    that step's original wait span), forward_source says expo_prof::forward, and the 32 forward windows
    of unprofiled steps are left out of the rank's forward (and named in a warning).
    """
    orig, spans = original
    truth = _paired(spans)
    trace = copy_trace_without(tmp_path, {SPAN_WAIT, "expo_prof::forward"})
    alone = analyze(readers.load([trace]).timelines)
    assert alone.ranks[0].forward_source == "execute_context"  # what the stripped trace alone would use

    result = run_analysis(trace, copy_log(tmp_path))

    got = [s for s in result.steps if s.step is not None]
    assert [s.forward_ns for s in got] == [o["fwd"][1] - o["fwd"][0] for o in truth]
    assert [s.wait_ns for s in got] == [o["wait"][1] - o["wait"][0] for o in truth]
    assert result.ranks[0].forward_source == "expo_prof::forward"
    assert result.ranks[0].forward_ns == sum(s.forward_ns for s in got)
    assert any("32 of 65 forward window(s) are left out" in w for w in result.warnings)


def test_device_timed_windows_go_to_the_step_of_their_launch(tmp_path, original):
    """GIVEN the real log edited so that every step is device-timed and its windows lie 50 ms later than the
    host step (a device running behind the host), beside the trace without wait spans
    WHEN both are analysed
    THEN each wait still goes to the step in which it was launched (by the step line's t0_ns): the same
    per-step waits as the host-timed log gives, although 50 ms is several steps' length.
    """
    orig, spans = original
    truth = _paired(spans)
    shift = 50_000_000

    def device_late(obj: dict) -> None:
        if obj.get("type") == "step":
            obj["timing"] = "device"
            for key in ("fwd", "exp", "wait"):
                if obj.get(key):
                    obj[key] = [obj[key][0] + shift, obj[key][1] + shift]

    result = run_analysis(copy_trace_without(tmp_path, {SPAN_WAIT}), copy_log(tmp_path, device_late))

    got = [s for s in result.steps if s.step is not None]
    assert [s.wait_ns for s in got] == [o["wait"][1] - o["wait"][0] for o in truth]


@pytest.mark.parametrize(
    ("case", "edit", "why"),
    [
        ("no clock pair", lambda o: [o.pop(k, None) for k in ("mono_ns", "wall_ns")] if o["type"] == "header" else None,
         "no wall/monotonic clock pair"),
        ("a day apart", lambda o: o.update(wall_ns=o["wall_ns"] - 86_400 * 10**9) if o["type"] == "header" else None,
         "does not overlap"),
    ],
)
def test_unrelatable_clocks_keep_the_per_rank_sum_and_say_why(tmp_path, case, edit, why):
    """GIVEN the trace without wait spans and a copy of the real log whose header lacks the wall/monotonic
    pair, or places the log a day before the trace
    WHEN both are analysed
    THEN no step gets a wait, the rank's wait is the log's whole wait (as before), and one warning says the
    steps could not be mapped and why.
    """
    result = run_analysis(copy_trace_without(tmp_path, {SPAN_WAIT}), copy_log(tmp_path, edit))

    assert [s.wait_ns for s in result.steps] == [0] * len(result.steps) and len(result.steps) == 33
    assert result.ranks[0].wait_ns == sum(o["wait"][1] - o["wait"][0] for o in log_steps()[0])
    lines = [w for w in result.warnings if "could not be mapped" in w]
    assert len(lines) == 1 and why in lines[0] and "summed per rank only" in lines[0], result.warnings
    assert "\n" not in lines[0]


def test_a_trace_with_its_own_wait_spans_keeps_them(tmp_path):
    """GIVEN the real run directory as recorded (trace with expo_prof::wait spans, and the log)
    WHEN analysed
    THEN the steps' waits are the trace's spans (the log is not mapped), as before.
    """
    shutil.copytree(RUN / "profiler", tmp_path / "profiler")
    shutil.copytree(RUN / "overlay", tmp_path / "overlay")
    spans_only = analyze(readers.load([TRACE]).timelines)

    result = run_analysis(tmp_path)

    assert [s.wait_ns for s in result.steps] == [s.wait_ns for s in spans_only.steps]
    assert not any("taken from the overlay event log" in w for w in result.warnings)


def analyze_paths(*paths: Path):
    """As ``expo-prof analyze PATH…`` does: runs from run directories / input PATHs."""
    from expo_prof.runs.labels import run_labels

    loaded = readers.load(list(paths))
    return analyze(loaded.timelines, warnings=loaded.warnings, runs=run_labels(loaded.timelines, list(paths)))


def test_trace_and_log_given_as_separate_paths_are_one_run(tmp_path, original):
    """GIVEN the trace without wait spans in one folder and the real log in another (no manifest: a server
    run by hand with the profiler's directory and EXPO_PROF_OUT apart), and both files side by side
    WHEN analyze is given the two files as two PATHs
    THEN each time they are one run (the log logged the process the trace profiled: same pid, overlapping
    times; files side by side are their folder's run) and the log's waits fill the trace's steps.
    """
    truth = [o["wait"][1] - o["wait"][0] for o in _paired(original[1])]
    (tmp_path / "prof").mkdir()
    (tmp_path / "logs").mkdir()
    (tmp_path / "both").mkdir()
    apart = analyze_paths(copy_trace_without(tmp_path / "prof", {SPAN_WAIT}), copy_log(tmp_path / "logs"))
    together = analyze_paths(copy_trace_without(tmp_path / "both", {SPAN_WAIT}), copy_log(tmp_path / "both"))

    for result in (apart, together):
        assert [(r.recording, r.fmt) for r in result.ranks] == [(None, "kineto")]
        assert [s.wait_ns for s in result.steps if s.step is not None] == truth


def test_a_log_of_another_process_stays_its_own_run(tmp_path):
    """GIVEN the trace without wait spans in one folder and, in another, the real log with its header's pid
    changed (another process)
    WHEN analyze is given the two folders
    THEN they are two runs, labelled by the PATHs: a kineto row and an overlay-log row, no wait mapped.
    """
    prof, logs = tmp_path / "prof", tmp_path / "logs"
    prof.mkdir()
    logs.mkdir()
    copy_trace_without(prof, {SPAN_WAIT})
    copy_log(logs, lambda o: o.update(pid=o["pid"] + 1) if o["type"] == "header" else None)

    result = analyze_paths(prof, logs)

    assert [(r.recording, r.fmt) for r in result.ranks] == [(str(prof), "kineto"), (str(logs), "overlay-log")]
    assert result.ranks[0].wait_ns is None  # not measured: no wait span, no log of this process
    assert not any("overlay event log" in w for w in result.warnings)


def _no_wait(obj: dict) -> None:
    obj.pop("wait", None)


def test_a_log_without_waits_is_an_uncounted_view_not_a_wait_source(tmp_path):
    """GIVEN the real trace without its expo_prof::wait spans, and the real log with every step's wait removed
    WHEN both are analysed together
    THEN nothing supplies a wait (the rank's wait is unknown, no log is placed on the trace),
    and the log is named as another view of the same draws that was not counted — a warning, since the two
    views count different steps (the log 65, the trace 33), saying in the trace's numbering where the log's fall.
    """
    result = run_analysis(copy_trace_without(tmp_path, {SPAN_WAIT}), copy_log(tmp_path, _no_wait))
    assert result.ranks[0].fmt == "kineto" and result.ranks[0].wait_ns is None
    assert not any("overlay event log" in w for w in result.warnings)
    views = [w for w in result.warnings if "another view of the same draws" in w]
    assert len(views) == 1 and result.info == []
    assert views[0].startswith("rank 0: 33 instances from kineto; the overlay-log input(s) of the same rank not "
                               "counted (another view of the same draws would count each twice; choose with --source)")
    # The trace counts: every step id is the trace's; the log's steps are said by where they fall against them.
    assert "kineto 33 steps, overlay-log 65 steps" in views[0] and "log steps" not in views[0]
    assert "the trace holds steps 0–32" in views[0] and "those 33 of the trace's, 32 before and 0 after" in views[0]


def test_logs_are_never_placed_on_another_log(tmp_path):
    """GIVEN two logs of rank 0: the real log without waits (its 65 draws), and the real log without draws
    (only its waits)
    WHEN analysed together
    THEN the draws come from the first log and no wait is borrowed from the second: waits are placed
    only on a profiler trace's steps, never on an overlay log's.
    """
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    draws = copy_log(tmp_path / "a", _no_wait)
    waits = copy_log(tmp_path / "b", lambda o: o.pop("exp", None))
    result = run_analysis(draws, waits)
    assert result.summary.instances == 65 and result.ranks[0].fmt == "overlay-log"
    assert result.ranks[0].wait_ns is None and result.warnings == [] and result.info == []

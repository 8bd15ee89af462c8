"""The Overlay's seams, one behaviour each: what the runner hook and the sampler see, and what the log says.

GIVEN the real Overlay on the real CPU thread lane (or a thin wrapper of it
where a test needs a lane without an attribute, or a lane that fails), WHEN
the runner hook and vLLM's sampler call it in one particular order, THEN the
tokens come from the right draw, the overlay stays on, and the event log's
step lines and summary say exactly what happened.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
import torch
from eventlog_schema import check_lines, read_log  # type: ignore[import-not-found]

from overlay import guard
from overlay.events import EventLog
from overlay.lanes import CpuThreadLane, Draw
from overlay.sampler import Overlay, overlay_random_sample

#: Test data drawn from its own generator: probs made after a launch must not move vLLM's
#: default generator, which the overlay's q is forked from (overlay/rng.py).
TEST_RNG = torch.Generator().manual_seed(0)


def _overlay(tmp_path, lane=None, **kw) -> Overlay:
    made = lane if lane is not None else CpuThreadLane(seed=1)
    return Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: made, **kw)


def _probs(rows, vocab=16, dtype=torch.float32):
    return torch.softmax(torch.randn(rows, vocab, generator=TEST_RNG), dim=-1).to(dtype)


def _lines(ov, tmp_path):
    """The log's lines so far (the writer thread has written everything queued)."""
    assert ov.log.drain(10)
    return read_log(tmp_path)[1]


def _step(ov, rows=2, vocab=16, dtype=torch.float32, **kw):
    args = {"all_greedy": False, "seeded_rows": 0, **kw}
    return ov.begin_step(rows=rows, vocab=vocab, dtype=dtype, device="cpu", **args)


@pytest.fixture
def overlay_errors():
    """Errors the overlay reports to the plugin's guard (each one would switch it off)."""
    seen: list[BaseException] = []
    before = (guard._on_error, guard._on_not_applicable)
    guard.set_handlers(seen.append, before[1])
    try:
        yield seen
    finally:
        guard.set_handlers(*before)


class _Recorder:
    """``inline`` / ``finish`` stand-ins that record their calls and return a marker."""

    def __init__(self, name):
        self.name, self.calls = name, []

    def __call__(self, *args):
        self.calls.append(args)
        return self.name


def test_a_one_row_batch_is_a_step_with_its_own_dtype(tmp_path):
    # GIVEN a one-row float64 batch (the schema knows float32 and float64) WHEN the runner opens its step and the sampler takes q
    ov = _overlay(tmp_path)
    step = _step(ov, rows=1, dtype=torch.float64)
    ov.end_forward(step)
    finish = _Recorder("lane")
    out = overlay_random_sample(_probs(1, dtype=torch.float64), {}, inline=_Recorder("inline"), finish=finish,
                                overlay=ov)
    ov.shutdown()
    # THEN it is a step like any other: launched, used, and logged with the batch's dtype
    assert out == "lane" and finish.calls[0][1].shape == (1, 16)
    (line,) = read_log(tmp_path)[1]["step"]
    assert (line["rows"], line["dtype"], line["launched"], line["used"]) == (1, "float64", True, True)


def test_a_step_uses_the_lanes_q_and_leaves_the_overlay_on(tmp_path, overlay_errors):
    # GIVEN an ordinary step WHEN the sampler runs (called the vLLM <= 0.22 way: no fp64 argument)
    ov = _overlay(tmp_path)
    ov.end_forward(_step(ov))
    inline, finish = _Recorder("inline"), _Recorder("lane")
    out = overlay_random_sample(_probs(2), {}, inline=inline, finish=finish, overlay=ov)
    # THEN the tokens come from the lane's float32 q, nothing is drawn inline, and no overlay error is reported
    assert out == "lane" and inline.calls == [] and finish.calls[0][1].dtype == torch.float32
    assert overlay_errors == []
    ov.shutdown()
    assert read_log(tmp_path)[1]["step"][0]["used"] is True


def test_with_no_overlay_the_call_is_exactly_vllms_inline_draw():
    # GIVEN no overlay installed WHEN the patched random_sample runs, with and without fp64 gumbel
    for fp64 in (False, True):
        inline = _Recorder("inline")
        probs = _probs(2)
        # THEN it is vLLM's own call with the same arguments
        assert overlay_random_sample(probs, {}, fp64, inline=inline, overlay=None) == "inline"
        assert len(inline.calls) == 1 and inline.calls[0][0] is probs and inline.calls[0][1:] == ({}, fp64)


def test_a_draw_that_does_not_fit_falls_back_with_the_callers_arguments(tmp_path, overlay_errors):
    # GIVEN a float32 step WHEN the sampler asks for fp64 gumbel noise (the lane's q does not fit)
    ov = _overlay(tmp_path)
    ov.end_forward(_step(ov))
    inline = _Recorder("inline")
    assert overlay_random_sample(_probs(2), {}, True, inline=inline, overlay=ov) == "inline"
    # THEN vLLM's inline draw gets exactly the caller's arguments, fp64 included
    assert inline.calls[0][1:] == ({}, True) and overlay_errors == []
    ov.shutdown()
    assert read_log(tmp_path)[1]["step"][0]["fallback"] == "dtype_mismatch"


def test_an_overlay_error_is_reported_with_the_exception_and_vllm_still_samples(tmp_path, overlay_errors):
    # GIVEN an overlay whose take fails
    ov = _overlay(tmp_path)
    boom = RuntimeError("take failed")

    def take(*_):
        raise boom

    ov.take = take
    inline = _Recorder("inline")
    # WHEN the sampler runs THEN vLLM draws inline and the guard gets that very exception (to warn and switch off)
    assert overlay_random_sample(_probs(2), {}, inline=inline, overlay=ov) == "inline"
    assert overlay_errors == [boom]


def test_an_unsized_step_is_no_pending_at_once_and_the_overlay_stays_on(tmp_path, overlay_errors):
    # GIVEN a forward whose batch the hook could not read (nothing launched)
    ov = _overlay(tmp_path)
    ov.end_forward(ov.begin_unsized_step("cpu"))
    inline, finish = _Recorder("inline"), _Recorder("lane")
    # WHEN the sampler runs
    assert overlay_random_sample(_probs(2), {}, inline=inline, finish=finish, overlay=ov) == "inline"
    # THEN it draws inline, no overlay error, and the step line is written right then with "no_pending"
    assert finish.calls == [] and overlay_errors == []
    (line,) = _lines(ov, tmp_path)["step"]
    assert (line["launched"], line["fallback"]) == (False, "no_pending")
    ov.shutdown()


def test_a_step_with_nothing_launched_is_written_when_its_forward_ends(tmp_path):
    # GIVEN an all-greedy batch (vLLM draws no noise) WHEN its forward ends
    ov = _overlay(tmp_path)
    ov.end_forward(_step(ov, all_greedy=True))
    # THEN its step line is already in the log, before any later step or the sampler
    (line,) = _lines(ov, tmp_path)["step"]
    assert (line["launched"], line["fallback"]) == (False, "all_greedy")
    ov.shutdown()


def test_sampler_calls_in_warm_up_are_each_counted_unattributed(tmp_path):
    # GIVEN vLLM's warm-up (sampler calls that are not steps) WHEN the sampler runs twice there, then one real step
    ov = _overlay(tmp_path)
    ov.lane_for("cpu")
    ov.warmup_depth = 1
    for _ in range(2):
        assert overlay_random_sample(_probs(2), {}, inline=_Recorder("inline"), overlay=ov) == "inline"
    ov.warmup_depth = 0
    ov.end_forward(_step(ov))
    for _ in range(3):  # AND the sampler runs three times for that one step
        overlay_random_sample(_probs(2), {}, inline=_Recorder("inline"), finish=_Recorder("lane"), overlay=ov)
    ov.shutdown()
    # THEN the two warm-up calls and the two extra calls are each counted, and only the step is a step
    _, lines = read_log(tmp_path)
    assert lines["summary"][-1]["unattributed"] == 4 and [s["step"] for s in lines["step"]] == [0]


def test_a_forward_left_open_at_the_launch_seam_is_closed_by_the_sampler(tmp_path):
    # GIVEN a step launched at the launch seam (no forward seam: the runner marks the forward open)
    ov = _overlay(tmp_path)
    step = _step(ov)
    step.forward_open = True
    # WHEN the sampler takes q
    finish = _Recorder("lane")
    assert overlay_random_sample(_probs(2), {}, inline=_Recorder("inline"), finish=finish, overlay=ov) == "lane"
    ov.shutdown()
    # THEN the forward window ends when the sampler came: a complete window, before the wait
    (line,) = read_log(tmp_path)[1]["step"]
    fwd, wait = line["fwd"], line["wait"]
    assert isinstance(fwd[0], int) and isinstance(fwd[1], int) and 0 <= fwd[0] <= fwd[1] <= wait[0]


def test_without_instrumentation_the_lane_takes_no_timestamps(tmp_path):
    # GIVEN the overlay with instrumentation off, on a lane that counts its timestamps
    class Counting(CpuThreadLane):
        stamps = 0

        def stamp(self):
            Counting.stamps += 1
            return super().stamp()

    ov = _overlay(tmp_path, lane=Counting(seed=1), instrument=False)
    # WHEN a whole step runs
    ov.end_forward(_step(ov))
    overlay_random_sample(_probs(2), {}, inline=_Recorder("inline"), finish=_Recorder("lane"), overlay=ov)
    ov.shutdown()
    # THEN no timestamp was taken, and the step line has no windows
    assert Counting.stamps == 0
    (line,) = read_log(tmp_path)[1]["step"]
    assert (line["used"], line["fwd"], line["exp"], line["wait"]) == (True, None, None, None)


def test_a_lane_failure_while_waiting_draws_inline_and_keeps_the_overlay_on(tmp_path, overlay_errors):
    # GIVEN a lane whose wait for q fails (a draw that errored or timed out)
    from overlay.lanes import LaneError

    class FailingWait(CpuThreadLane):
        def wait(self, draw):
            raise LaneError("exponential draw not done after 30 s")

    ov = _overlay(tmp_path, lane=FailingWait(seed=1))
    ov.end_forward(_step(ov))
    # WHEN the sampler runs THEN vLLM draws inline, it is no overlay error, and the step line says "error" at once
    inline = _Recorder("inline")
    assert overlay_random_sample(_probs(2), {}, inline=inline, overlay=ov) == "inline" and overlay_errors == []
    (line,) = _lines(ov, tmp_path)["step"]
    assert (line["launched"], line["used"], line["fallback"]) == (True, False, "error")
    ov.shutdown()


def test_a_lane_failure_at_launch_is_noticed_with_the_exception(tmp_path, warnings_of_overlay):
    # GIVEN a lane whose launch fails
    class Failing(CpuThreadLane):
        def launch(self, *a, **k):
            raise RuntimeError("no memory for q")

    ov = _overlay(tmp_path, lane=Failing(seed=1))
    # WHEN a step opens THEN it falls back ("error") and the notice and the Python log name the exception
    step = _step(ov)
    assert (step.launched, step.fallback) == (False, "error")
    ov.end_forward(step)
    ov.shutdown()
    (notice,) = [n for n in read_log(tmp_path)[1]["notice"] if n["level"] == "warning"]
    assert "RuntimeError('no memory for q')" in notice["message"]
    assert any("RuntimeError('no memory for q')" in r.getMessage() for r in warnings_of_overlay)


def test_a_lane_without_a_timing_attribute_is_host_timed(tmp_path):
    # GIVEN a lane that does not say how it is timed (a lane written elsewhere, wrapping the CPU lane)
    inner = CpuThreadLane(seed=1)

    class Plain:
        def __getattr__(self, name):
            if name == "timing":
                raise AttributeError(name)
            return getattr(inner, name)

    ov = _overlay(tmp_path, lane=Plain())
    # WHEN a step runs THEN its line is written at once and says host timing
    ov.end_forward(_step(ov))
    overlay_random_sample(_probs(2), {}, inline=_Recorder("inline"), finish=_Recorder("lane"), overlay=ov)
    (line,) = _lines(ov, tmp_path)["step"]
    assert line["timing"] == "host" and line["used"] is True
    ov.shutdown()


def test_a_step_waits_for_its_draw_before_its_line_is_written(tmp_path):
    # GIVEN the CPU lane's worker held up by an earlier job, and a step whose draw is queued behind it
    ov = _overlay(tmp_path)
    lane = ov.lane_for("cpu")
    gate = threading.Event()

    class Blocking:
        def exponential_(self, generator=None):
            gate.wait(30)

    held = Draw(1, 1, torch.float32, torch.device("cpu"))
    held.q, held.done = Blocking(), threading.Event()
    lane._jobs.put(held)
    first = _step(ov)
    ov.end_forward(first)
    # WHEN the next step (all greedy: nothing to launch) closes the first, whose q nobody consumed
    second = _step(ov, all_greedy=True)
    # THEN the first step's line is not written while its draw is still running (its window is unknown)
    assert ov.log.drain(10) and ov.log.steps == 0
    gate.set()
    assert first.draw.done.wait(30)
    ov.end_forward(second)
    # AND once the draw has finished both lines follow, in order
    lines = _lines(ov, tmp_path)["step"]
    assert [(s["step"], s["fallback"]) for s in lines] == [(0, "not_consumed"), (1, "all_greedy")]
    ov.shutdown()


def test_a_lane_placement_is_logged_and_noticed(tmp_path, warnings_of_overlay):
    # GIVEN a lane that reports where its thread was placed (and the overlay's logger at INFO; setLevel, not
    # .level, so logging's per-logger level cache is cleared too)
    import logging

    logger = logging.getLogger("vllm.expo_prof")
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        lane = CpuThreadLane(seed=1)
        lane.placement = "CPU lane thread on CPUs {1}"
        ov = _overlay(tmp_path, lane=lane)
        # WHEN the overlay creates it THEN the Python log and the event log both say where it runs
        ov.lane_for("cpu")
    finally:
        logger.setLevel(old)
    assert any(r.getMessage() == "expo-prof overlay: CPU lane thread on CPUs {1}" for r in warnings_of_overlay)
    assert [n["message"] for n in _lines(ov, tmp_path)["notice"]] == ["CPU lane thread on CPUs {1}"]
    ov.shutdown()


def test_an_unsized_step_the_sampler_never_reached_has_no_fallback(tmp_path):
    # GIVEN a forward whose batch the hook could not read (nothing launched), and no sampler call after it
    ov = _overlay(tmp_path)
    ov.end_forward(ov.begin_unsized_step("cpu"))
    # WHEN the next step opens THEN the unsized step is written as it was: nothing launched, no fallback
    # (not "not_consumed": there was no q to consume)
    ov.end_forward(_step(ov, all_greedy=True))
    lines = _lines(ov, tmp_path)["step"]
    assert [(s["launched"], s["fallback"]) for s in lines] == [(False, None), (False, "all_greedy")]
    ov.shutdown()


def test_the_overlay_keeps_its_lane_in_one_process_and_makes_one_new_lane_after_fork(tmp_path):
    # GIVEN an overlay whose lane factory counts the lanes it makes, stepping twice in this process
    made: list[CpuThreadLane] = []

    def factory(device, instrument):
        made.append(CpuThreadLane(seed=1))
        return made[-1]

    ov = Overlay(EventLog(str(tmp_path / "parent")), lane_factory=factory)

    def step_and_sample():
        ov.end_forward(_step(ov))
        return overlay_random_sample(_probs(2), {}, inline=_Recorder("inline"), finish=_Recorder("lane"), overlay=ov)

    ov.lane_for("cpu")  # (a hook may ask for the lane before the first step)
    assert [step_and_sample() for _ in range(2)] == ["lane", "lane"]
    assert len(made) == 1  # THEN one lane serves every step of a process
    # WHEN the process forks and the child steps twice. (torch on one thread across the fork: libgomp cannot
    # run a parallel region in a child forked after the parent ran one; that is not the subject here.)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            ov.log.out_dir = str(tmp_path / "child")
            got = [step_and_sample() for _ in range(2)]
            ov.shutdown()
            os.write(w, json.dumps({"got": got, "lanes": len(made), "log": ov.log.path}).encode())
            code = 0
        finally:
            os._exit(code)
    torch.set_num_threads(threads)
    os.close(w)
    deadline = time.monotonic() + 60
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            pytest.fail("the forked child hung")
        time.sleep(0.02)
    child = json.loads(os.read(r, 4096) or b"{}")
    ov.shutdown()
    # THEN the child made exactly one lane of its own for both its steps, used it, and wrote its own log
    assert child["got"] == ["lane", "lane"] and child["lanes"] == 2
    lines = check_lines([json.loads(x) for x in Path(child["log"]).read_text().splitlines()])
    assert [(s["step"], s["used"]) for s in lines["step"]] == [(2, True), (3, True)]

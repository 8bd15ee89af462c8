"""The two lanes: the real CPU worker thread, and the device-stream lane on a FAKE device."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from eventlog_schema import read_log
from fake_device import FakeDeviceModule
from overlay.contract import SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT
from overlay.events import EventLog
from overlay.lanes import CpuThreadLane, DeviceStreamLane, LaneError
from overlay.patches.profiler import add_all_threads
from overlay.sampler import Overlay, overlay_random_sample

#: Test data drawn from its own generator: probs made after a launch must not move vLLM's
#: default generator, which the overlay's q is forked from (overlay/rng.py).
TEST_RNG = torch.Generator().manual_seed(0)

VOCAB = 48


def _inline(probs, generators, fp64=False):  # only reached on a fallback
    raise AssertionError("the side-lane q should have been used")


# -- CPU thread lane -----------------------------------------------------------------


def test_cpu_lane_draws_on_its_own_thread_into_a_reused_buffer():
    # GIVEN a CPU lane
    lane = CpuThreadLane(seed=3)
    seen_threads = []
    # WHEN two draws of different sizes are launched and waited for
    draw1 = lane.launch(4, VOCAB, torch.float32, "cpu")
    q1, start1, end1 = lane.wait(draw1)
    seen_threads.append(lane._thread.ident)
    ptr1 = q1.data_ptr()
    draw2 = lane.launch(3, VOCAB, torch.float32, "cpu")
    q2, _, _ = lane.wait(draw2)
    lane.close()
    # THEN q has the asked shape, is contiguous, positive, and lives in the same buffer
    assert q2.shape == (3, VOCAB) and q2.is_contiguous() and bool((q2 > 0).all())
    assert q2.data_ptr() == ptr1
    # AND it was drawn on the worker thread, timed on the host clock, before the wait returned
    assert seen_threads[0] != threading.get_ident()
    assert draw1.exp[0] <= draw1.exp[1] <= end1 and start1 <= end1


def test_cpu_lane_worker_error_surfaces_as_lane_error():
    # GIVEN a draw the worker cannot do (exponential of an integer tensor)
    lane = CpuThreadLane(seed=3)
    draw = lane.launch(2, VOCAB, torch.int64, "cpu")
    # WHEN the consumer waits THEN it gets a LaneError naming the cause, and the lane keeps working
    with pytest.raises(LaneError, match="exponential draw failed"):
        lane.wait(draw)
    q, _, _ = lane.wait(lane.launch(2, VOCAB, torch.float32, "cpu"))
    assert bool((q > 0).all())
    lane.close()


def test_cpu_lane_refuses_other_devices():
    lane = CpuThreadLane(seed=3)
    with pytest.raises(LaneError, match="cannot draw on meta"):
        lane.launch(2, VOCAB, torch.float32, "meta")
    lane.close()


def test_cpu_lane_step_lines_and_profiler_spans(tmp_path):
    # GIVEN an overlay on the CPU lane, profiled with all threads (as the profiler patch sets up)
    ov = Overlay(EventLog(str(tmp_path / "log")), lane_factory=lambda d, i: CpuThreadLane(seed=5))
    kwargs = {"activities": [torch.profiler.ProfilerActivity.CPU]}
    add_all_threads(kwargs)
    weights = torch.randn(256, 256, generator=TEST_RNG)
    # WHEN three steps run a real torch forward and sample
    with torch.profiler.profile(**kwargs) as prof:
        for _ in range(3):
            step = ov.begin_step(rows=8, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
            from overlay.lanes import span

            with span(SPAN_FORWARD):
                x = torch.randn(64, 256, generator=TEST_RNG)
                for _ in range(20):
                    x = torch.tanh(x @ weights)
            ov.end_forward(step)
            probs = torch.softmax(torch.randn(8, VOCAB, generator=TEST_RNG), dim=-1)
            overlay_random_sample(probs, {}, False, inline=_inline, overlay=ov)
    ov.shutdown()
    # THEN the log validates, every step used q, with host windows in order
    _, lines = read_log(tmp_path / "log")
    assert lines["header"][0]["lane"] == "thread" and lines["header"][0]["backend"] == "cpu"
    steps = lines["step"]
    assert [s["used"] for s in steps] == [True] * 3
    for s in steps:
        assert s["timing"] == "host" and s["rows"] == 8 and s["vocab"] == VOCAB
        assert 0 <= s["fwd"][0] <= s["fwd"][1] <= s["wait"][0] <= s["wait"][1]
        assert 0 <= s["exp"][0] <= s["exp"][1] <= s["wait"][1]
    assert lines["summary"][-1] == {**lines["summary"][-1], "steps": 3, "used": 3, "launched": 3}
    # AND the torch trace shows the exponential on the worker thread, the wait and forward on the main one
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    tids = {name: {e["tid"] for e in events if e.get("name") == name}
            for name in (SPAN_EXPONENTIAL, SPAN_WAIT, SPAN_FORWARD, "aten::exponential_")}
    assert tids[SPAN_EXPONENTIAL] and tids[SPAN_WAIT] and tids[SPAN_FORWARD]
    assert tids[SPAN_EXPONENTIAL] == tids["aten::exponential_"]
    assert tids[SPAN_EXPONENTIAL].isdisjoint(tids[SPAN_FORWARD])


def test_instrument_off_writes_steps_without_windows(tmp_path):
    # GIVEN EXPO_PROF_INSTRUMENT=0 semantics
    ov = Overlay(EventLog(str(tmp_path), instrument=False), instrument=False,
                 lane_factory=lambda d, i: CpuThreadLane(seed=5))
    step = ov.begin_step(rows=2, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    overlay_random_sample(torch.softmax(torch.randn(2, VOCAB, generator=TEST_RNG), -1), {}, False, inline=_inline, overlay=ov)
    ov.shutdown()
    # THEN the step is still counted and used, with no timing
    _, lines = read_log(tmp_path)
    assert lines["header"][0]["instrument"] is False
    (s,) = lines["step"]
    assert s["used"] and s["fwd"] is None and s["exp"] is None and s["wait"] is None


# -- device-stream lane on the FAKE device ---------------------------------------------


def _fake_overlay(tmp_path, fake, instrument=True):
    def factory(device, instr):
        return DeviceStreamLane(device, device_module=fake, instrument=instr, record_stream=fake.record_stream)

    return Overlay(EventLog(str(tmp_path), instrument=instrument), instrument=instrument, lane_factory=factory)


def _stepper(ov, rows):
    """One overlay step (launch, forward, sample) on the fake device, as a function."""
    probs = torch.softmax(torch.randn(rows, VOCAB, generator=TEST_RNG), -1)

    def one_step():
        step = ov.begin_step(rows=rows, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
        ov.end_forward(step)
        overlay_random_sample(probs.clone(), {}, False, inline=_inline, overlay=ov)

    return one_step


def test_device_lane_times_the_forward_of_an_unsized_step_on_the_device(tmp_path):
    # GIVEN the instrumented device lane on a FakeDeviceModule
    fake = FakeDeviceModule()
    ov = _fake_overlay(tmp_path, fake)
    # WHEN a forward whose batch the runner hook could not read runs, then the sampler (inline)
    step = ov.begin_unsized_step("cpu")
    ov.end_forward(step)
    tokens = overlay_random_sample(torch.softmax(torch.randn(3, VOCAB, generator=TEST_RNG), -1), {}, False,
                                   inline=lambda probs, generators, fp64=False: probs.argmax(dim=-1), overlay=ov)
    assert tokens.shape == (3,)
    fake.run_device()  # the device finished the forward
    ov.shutdown()
    _, lines = read_log(tmp_path)
    # THEN its forward window is in device time from the step's own anchor event, nothing launched
    (s,) = lines["step"]
    assert (s["launched"], s["fallback"], s["timing"]) == (False, "no_pending", "device")
    assert s["fwd"] is not None and 0 <= s["fwd"][0] <= s["fwd"][1]


def test_device_lane_orders_streams_and_keeps_q_alive(tmp_path):
    # GIVEN the device lane on a FakeDeviceModule
    fake = FakeDeviceModule()
    ov = _fake_overlay(tmp_path, fake)
    # WHEN one step launches, forwards and samples
    step = ov.begin_step(rows=3, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    probs = torch.softmax(torch.randn(3, VOCAB, generator=TEST_RNG), -1)
    tokens = overlay_random_sample(probs, {}, False, inline=_inline, overlay=ov)
    assert tokens.shape == (3,)
    calls = fake.calls
    names = [c[0] for c in calls]
    # THEN the side stream first waits for the current stream, then q is drawn inside the side stream
    wait_idx = names.index("wait_stream")
    assert calls[wait_idx][1:] == ("side1", "current")
    assert wait_idx < names.index("enter_stream") < names.index("exit_stream")
    done = step.draw.done
    assert ("record", "side1", done) in calls
    # AND the consumer waits on the device for exactly that event (no host synchronise) ...
    assert ("wait_event", "current", done) in calls
    assert fake.synchronize_calls == 0
    # ... and q is recorded on the consumer stream after that wait, so it outlives its use
    assert fake.record_stream_calls == [((3, VOCAB), fake.default)]
    # AND the step, consumed, no longer holds q (its events are enough for timing)
    assert step.draw.q is None
    assert names.index("record_stream") > names.index("wait_event")
    ov.shutdown()


def test_device_lane_steps_are_written_a_step_late_without_synchronising(tmp_path):
    # GIVEN the device lane on a FakeDeviceModule whose events complete only when it "runs"
    fake = FakeDeviceModule()
    ov = _fake_overlay(tmp_path, fake)
    one_step = _stepper(ov, rows=4)

    # WHEN step 0 ran but the device has not finished it
    one_step()
    # THEN no step line is written yet (the file opens with its first line): the events
    # are not even looked at before the next launch
    assert list(tmp_path.glob("*.jsonl")) == []
    assert fake.queries == 0
    # WHEN the device finishes and step 1 is launched
    fake.run_device()
    one_step()
    # THEN step 0 is written with device timing, read from the events (queried, not synchronised)
    assert fake.queries > 0
    assert ov.log.drain(10)  # lines are written by the log's writer thread
    log_file = next(tmp_path.glob("*.jsonl"))
    lines = [json.loads(x) for x in log_file.read_text().splitlines()]
    assert [x["type"] for x in lines] == ["header", "step"]
    s0 = lines[1]
    assert s0["step"] == 0 and s0["used"] and s0["timing"] == "device"
    assert lines[0]["lane"] == "stream"
    for name in ("fwd", "exp", "wait"):
        assert s0[name] is not None and 0 <= s0[name][0] <= s0[name][1]
    # WHEN the process exits with step 1's events still pending
    ov.shutdown()
    # THEN step 1 is still accounted for, without the windows nobody could read, and never synchronised
    _, by_type = read_log(tmp_path)
    assert [s["step"] for s in by_type["step"]] == [0, 1]
    assert by_type["step"][1]["fwd"] is None and by_type["step"][1]["used"]
    assert by_type["summary"][-1]["used"] == 2
    assert fake.synchronize_calls == 0


def test_device_lane_without_instrumentation_records_only_the_done_event(tmp_path):
    # GIVEN instrumentation off
    fake = FakeDeviceModule()
    ov = _fake_overlay(tmp_path, fake, instrument=False)
    step = ov.begin_step(rows=2, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    overlay_random_sample(torch.softmax(torch.randn(2, VOCAB, generator=TEST_RNG), -1), {}, False, inline=_inline, overlay=ov)
    ov.shutdown()
    # THEN no event with timing is recorded: only the one the consumer waits on (side stream) and the
    # fence of the freed q on the consumer stream (how long the allocator keeps its block: q_block_peak_bytes)
    records = [c for c in fake.calls if c[0] == "record"]
    assert [(c[1], c[2].enable_timing) for c in records] == [("side1", False), ("current", False)]
    assert records[0][2] is step.draw.done
    _, lines = read_log(tmp_path)
    assert lines["step"][0]["used"] and lines["step"][0]["exp"] is None


# -- vLLM's own torch profiler sees the CPU lane -----------------------------------------


def _profile_one_step_with_vllm_profiler(tmp_path, ov):
    import gzip

    from vllm.config import ProfilerConfig
    from vllm.profiler.wrapper import TorchProfilerWrapper

    trace_dir = tmp_path / "trace"
    wrapper = TorchProfilerWrapper(ProfilerConfig(profiler="torch", torch_profiler_dir=str(trace_dir)),
                                   worker_name="w0", local_rank=0, activities=["CPU"])
    wrapper.start()
    step = ov.begin_step(rows=8, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    x = torch.randn(128, 128, generator=TEST_RNG)
    for _ in range(50):
        x = torch.tanh(x @ x)
    ov.end_forward(step)
    overlay_random_sample(torch.softmax(torch.randn(8, VOCAB, generator=TEST_RNG), -1), {}, False, inline=_inline, overlay=ov)
    wrapper.stop()
    (trace,) = trace_dir.glob("*.pt.trace.json.gz")
    events = json.loads(gzip.open(trace).read())["traceEvents"]
    return {name: {e["tid"] for e in events if e.get("name") == name} for name in ("aten::exponential_", SPAN_WAIT)}


@pytest.mark.slow
def test_vllm_profiler_records_the_lane_thread_only_with_the_profiler_patch(tmp_path, vllm_available):
    # GIVEN the overlay on with its profiler patch, its CPU lane already running
    from overlay import plugin
    from overlay.patches import profiler

    ov = plugin.enable(log=EventLog(str(tmp_path / "log")), patches=(profiler,))
    ov.lane_for("cpu")
    # WHEN vLLM's own TorchProfilerWrapper profiles a step
    tids = _profile_one_step_with_vllm_profiler(tmp_path / "on", ov)
    # THEN the exponential drawn on the worker thread is in the trace, on another thread than the wait
    assert tids["aten::exponential_"] and tids[SPAN_WAIT]
    assert tids["aten::exponential_"].isdisjoint(tids[SPAN_WAIT])
    plugin.unregister()
    # GIVEN the patch removed WHEN profiled again THEN the lane's draw is invisible (why the patch exists)
    ov2 = Overlay(EventLog(None), lane_factory=lambda d, i: CpuThreadLane(seed=5))
    tids = _profile_one_step_with_vllm_profiler(tmp_path / "off", ov2)
    ov2.shutdown()
    assert tids["aten::exponential_"] == set() and tids[SPAN_WAIT]


# -- where the CPU lane's thread runs ----------------------------------------------------

_PLACEMENT = """
import os, threading, json
from overlay.lanes import CpuThreadLane

everything = os.sched_getaffinity(0)
helper = threading.Thread(target=threading.Event().wait, daemon=True)  # another thread of the process
if %s:
    helper.start()  # started before the binding: unpinned
os.sched_setaffinity(0, {min(everything)})  # what vLLM's OpenMP binding does to the model thread
if not helper.is_alive():
    helper.start()  # started after: inherits the narrow mask, as all of vLLM's worker threads do
lane = CpuThreadLane(seed=1, cpus=%s)
q, _, _ = lane.wait(lane.launch(2, 8, __import__('torch').float32, 'cpu'))
print(json.dumps({"lane": sorted(lane.cpus), "model": sorted(os.sched_getaffinity(0)),
                  "all": sorted(everything), "placement": lane.placement}))
"""


def _placement(cpus_arg: str, helper_first: bool = True) -> dict:
    import os
    import subprocess
    import sys
    from pathlib import Path

    if len(os.sched_getaffinity(0)) < 2:
        pytest.fail("needs at least 2 CPUs to place the lane beside the model thread")
    proc = subprocess.run([sys.executable, "-c", _PLACEMENT % (helper_first, cpus_arg)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.procs
@pytest.mark.parametrize("helper_first", [True, False], ids=["some-thread-unpinned", "every-thread-pinned"])
def test_auto_places_the_lane_beside_the_pinned_model_thread(helper_first):
    # GIVEN a process whose model thread is pinned to one CPU (vLLM CPU's OpenMP binding),
    # with another thread either unpinned or (as in vLLM's worker) pinned the same way
    # WHEN the CPU lane starts with cpus="auto"
    out = _placement('"auto"', helper_first)
    # THEN its thread runs on the other CPUs, not time-sliced with the forward
    assert out["model"] == [out["all"][0]]
    assert out["lane"] == out["all"][1:]
    assert "beside the forward's pinned CPUs" in out["placement"]


@pytest.mark.procs
def test_inherit_keeps_the_lane_with_the_model_thread_and_explicit_cpus_are_obeyed():
    # GIVEN the same pinning WHEN placement is "inherit" THEN the lane shares the model's CPU
    out = _placement('"inherit"')
    assert out["lane"] == out["model"]
    # WHEN an explicit CPU set is given THEN exactly that set
    last_cpu = max(__import__("os").sched_getaffinity(0))
    out = _placement("{" + str(last_cpu) + "}")  # a Python set literal
    assert out["lane"] == [out["all"][-1]]


# -- NVTX / mstx ranges while profiling ---------------------------------------------------


def _range_calls(fake):
    return [c for c in fake.calls if c[0].startswith("range_")]


@pytest.mark.parametrize("kind", ["nvtx", "mstx"])
def test_device_lane_spans_are_device_ranges_only_while_profiling(tmp_path, kind):
    # GIVEN the device lane on a FAKE CUDA (nvtx) / Ascend (mstx) module
    from torch.profiler import ProfilerActivity, profile

    fake = FakeDeviceModule(ranges=kind)
    ov = _fake_overlay(tmp_path, fake)
    one_step = _stepper(ov, rows=2)

    # WHEN a step runs without a profiler THEN no range is marked
    one_step()
    assert _range_calls(fake) == []
    # WHEN a step runs under torch.profiler
    with profile(activities=[ProfilerActivity.CPU]):
        one_step()
    calls = _range_calls(fake)
    # THEN the draw and the wait are device ranges, each closed
    if kind == "nvtx":
        assert calls == [("range_push", SPAN_EXPONENTIAL), ("range_pop",), ("range_push", SPAN_WAIT), ("range_pop",)]
        assert fake.nvtx.depth == 0
    else:
        (s1, e1, s2, e2) = calls
        assert (s1[:2], s2[:2]) == (("range_start", SPAN_EXPONENTIAL), ("range_start", SPAN_WAIT))
        assert (e1, e2) == (("range_end", s1[2]), ("range_end", s2[2]))
    # WHEN the overlay shuts down THEN later spans (another lane, a CPU run) mark no device range
    ov.shutdown()
    fake.calls.clear()
    with profile(activities=[ProfilerActivity.CPU]):
        from overlay.lanes import span

        with span(SPAN_EXPONENTIAL):
            pass
    assert _range_calls(fake) == []


def test_default_lane_is_a_placed_thread_on_cpu_and_a_side_stream_elsewhere(monkeypatch):
    # GIVEN vLLM's device for the sampler
    from overlay.sampler import default_lane

    # WHEN it is the CPU THEN the lane is a drawing thread placed by the "auto" rule (beside the forward)
    lane = default_lane("cpu", instrument=True)
    assert isinstance(lane, CpuThreadLane)
    assert lane._placed.wait(10)
    assert lane.placement is not None and lane.placement.startswith("CPU lane thread on CPUs "), lane.placement
    lane.close()
    # WHEN it is an accelerator (a FAKE device module stands in for torch.cuda / torch_npu here)
    fake = FakeDeviceModule()
    monkeypatch.setattr(torch, "get_device_module", lambda device=None: fake)
    for instrument in (True, False):
        lane = default_lane("cuda:1", instrument=instrument)
        # THEN it is a side stream of exactly that device, instrumented as asked
        assert isinstance(lane, DeviceStreamLane) and lane.mod is fake
        assert lane.device == torch.device("cuda:1") and lane.instrument is instrument


def test_at_most_max_pending_steps_wait_for_their_device_timing(tmp_path):
    # GIVEN the device lane on a FakeDeviceModule whose device never runs (no event ever completes)
    from overlay.sampler import MAX_PENDING

    fake = FakeDeviceModule()
    ov = _fake_overlay(tmp_path, fake)
    one_step = _stepper(ov, rows=2)
    # WHEN MAX_PENDING + 6 steps complete and the overlay flushes
    for _ in range(MAX_PENDING + 6):
        one_step()
    ov.flush()
    # THEN exactly MAX_PENDING steps still wait for their timing; the 6 oldest were written without it
    assert ov.log.steps == 6
    assert ov.log.drain(10)
    ov.shutdown()
    _, lines = read_log(tmp_path)
    assert [s["exp"] for s in lines["step"][:6]] == [None] * 6 and len(lines["step"]) == MAX_PENDING + 6

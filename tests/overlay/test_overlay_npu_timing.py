"""Device windows on Ascend NPU are timed without stalling the host (overlay/npu_timing.py).

torch_npu's ``Event.elapsed_time`` flushes every stream's launch queue and synchronises both events
(``NPUEvent::elapsed_time`` in torch_npu/csrc/core/npu/NPUEvent.cpp). The device lane reads its
step windows from ``begin_step``, right before the next forward is launched, so it must never call
it there. No NPU exists here: the lane runs on FakeNpuModule (FAKE torch.npu, events with raw
handles, an ``elapsed_time`` that counts its flush) and a FAKE ``aclrtEventElapsedTime`` reached
through the real ctypes call.
"""

from __future__ import annotations

import torch

from eventlog_schema import read_log
from fake_device import FakeNpuModule
from overlay.events import EventLog
from overlay.lanes import DeviceStreamLane
from overlay.npu_timing import AclEventTimer, event_timer
from overlay.sampler import Overlay, overlay_random_sample

ROWS, VOCAB = 4, 64
DATA = torch.Generator().manual_seed(0)


def _inline(probs, generators, fp64=False):  # only reached on a fallback
    raise AssertionError("the side-lane q should have been used")


def _run_steps(tmp_path, fake, acl, n=6):
    lane = DeviceStreamLane("cpu", device_module=fake, record_stream=fake.record_stream, device_type="npu", acl=acl)
    ov = Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: lane)
    probs = torch.softmax(torch.randn(ROWS, VOCAB, generator=DATA), dim=-1)
    for _ in range(n):
        step = ov.begin_step(rows=ROWS, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
        ov.end_forward(step)
        overlay_random_sample(probs.clone(), {}, False, inline=_inline, overlay=ov)
        fake.run_device()  # the device finishes the step before the next one is launched
    flushes_on_the_step_path = fake.flushes
    ov.shutdown()
    _, lines = read_log(tmp_path)
    return flushes_on_the_step_path, lines["step"]


def test_npu_step_windows_are_read_without_a_flush(tmp_path):
    # GIVEN the device lane on a FAKE NPU whose Event.elapsed_time flushes (as torch_npu's does)
    fake = FakeNpuModule()
    # WHEN six steps run, each step's windows read at the next begin_step
    flushes, steps = _run_steps(tmp_path, fake, fake.acl_elapsed_time())
    # THEN no step ever called elapsed_time (no flush), the runtime's own function read the times,
    # and every window of the steps read on the step path is a device-timed interval
    assert flushes == 0 and fake.acl_calls > 0
    assert len(steps) == 6 and all(s["timing"] == "device" and s["used"] for s in steps)
    for s in steps[:5]:
        for name in ("fwd", "exp", "wait", "sample"):
            assert s[name] is not None and 0 <= s[name][0] <= s[name][1], (name, s)


def test_without_the_runtime_function_npu_windows_stay_null_rather_than_flush(tmp_path):
    # GIVEN an NPU lane where libascendcl cannot be had (this machine has none)
    fake = FakeNpuModule()
    assert event_timer("npu") is None
    # WHEN steps run
    flushes, steps = _run_steps(tmp_path, fake, acl=None)
    # THEN nothing flushed and the windows are null (unknown), never read through elapsed_time
    assert flushes == 0 and fake.flushes == 0
    assert all(s["used"] and s["exp"] is None and s["fwd"] is None for s in steps)


def test_timer_choice_per_device_and_the_c_call():
    # GIVEN two FAKE NPU events the fake device completed, 2 ms apart
    fake = FakeNpuModule()
    start, end = fake.Event(enable_timing=True), fake.Event(enable_timing=True)
    start.record()
    end.record()
    end.recorded_ns = start.recorded_ns + 2_000_000
    fake.run_device()
    # WHEN the NPU timer reads them through the C signature THEN it gives elapsed_time's answer, no flush
    timer = event_timer("npu", fake.acl_elapsed_time())
    assert isinstance(timer, AclEventTimer) and abs(timer(start, end) - 2.0) < 1e-4 and fake.flushes == 0
    # AND CUDA keeps Event.elapsed_time (cudaEventElapsedTime does not wait)
    assert abs(event_timer("cuda")(start, end) - 2.0) < 1e-9 and fake.flushes == 1

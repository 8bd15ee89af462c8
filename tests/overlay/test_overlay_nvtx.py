"""The overlay's spans as NVTX ranges while Nsight Systems listens, on a FAKE CUDA device module.

No GPU or nsys here: ``FakeDeviceModule(ranges="nvtx")`` (tests/overlay/fake_device.py, a FAKE of
``torch.cuda``) logs its ``nvtx.range_push`` / ``range_pop`` calls, and the test sets
``NVTX_INJECTION64_PATH`` as ``nsys profile`` does in the processes it profiles.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import pytest
import torch
from fake_device import FakeDeviceModule

from overlay import lanes
from overlay.contract import SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT
from overlay.events import EventLog
from overlay.lanes import NVTX_INJECTION_ENV, DeviceStreamLane, span
from overlay.sampler import Overlay, overlay_random_sample

VOCAB = 32
#: Where nsys's own injection library lives in its installation (the value only has to be non-empty).
NSYS_LIB = "/opt/nvidia/nsight-systems/2025.1.1/target-linux-x64/libToolsInjection64.so"


def _inline(probs, generators, fp64=False):  # only reached on a fallback
    raise AssertionError("the side-lane q should have been used")


def _overlay(tmp_path, fake):
    def factory(device, instrument):
        return DeviceStreamLane(device, device_module=fake, instrument=instrument, record_stream=fake.record_stream)

    return Overlay(EventLog(str(tmp_path)), lane_factory=factory)


def _step(ov):
    """One step as vLLM runs it: q launched, the forward (inside its span, as the runner patch does), sampling."""
    probs = torch.softmax(torch.randn(2, VOCAB), -1)
    step = ov.begin_step(rows=2, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    with span(SPAN_FORWARD):
        pass
    ov.end_forward(step)
    overlay_random_sample(probs, {}, False, inline=_inline, overlay=ov)


def _ranges(fake):
    return [c for c in fake.calls if c[0].startswith("range_")]


@contextmanager
def _running(tmp_path, kind="nvtx"):
    """A FAKE device module of ``kind`` and an overlay on it, shut down at the end."""
    fake = FakeDeviceModule(ranges=kind)
    ov = _overlay(tmp_path, fake)
    try:
        yield fake, ov
    finally:
        ov.shutdown()


def test_spans_are_nvtx_ranges_while_nsys_listens_without_a_torch_profiler(tmp_path, monkeypatch):
    # GIVEN nsys's injection variable in the environment and the device lane on a FAKE CUDA module
    monkeypatch.setenv(NVTX_INJECTION_ENV, NSYS_LIB)
    with _running(tmp_path) as (fake, ov):
        # WHEN a step runs with no torch profiler recording
        assert not torch.autograd.profiler._is_profiler_enabled
        _step(ov)
        # THEN the draw, the forward and the wait are NVTX ranges with the overlay's span names, each closed
        assert _ranges(fake) == [("range_push", SPAN_EXPONENTIAL), ("range_pop",), ("range_push", SPAN_FORWARD),
                                 ("range_pop",), ("range_push", SPAN_WAIT), ("range_pop",)]
        assert fake.nvtx.depth == 0


def test_without_a_tool_the_spans_stay_off(tmp_path, monkeypatch):
    # GIVEN no NVTX tool (the variable unset) WHEN a step runs without a torch profiler
    monkeypatch.delenv(NVTX_INJECTION_ENV, raising=False)
    with _running(tmp_path) as (fake, ov):
        _step(ov)
        # THEN no NVTX call at all (nothing to pay when nobody listens)
        assert _ranges(fake) == [] and lanes._tool_ranges is None


def test_the_tool_is_looked_for_once_when_the_lane_is_made_and_forgotten_at_shutdown(tmp_path, monkeypatch):
    # GIVEN a lane made while no tool listened
    monkeypatch.delenv(NVTX_INJECTION_ENV, raising=False)
    fake = FakeDeviceModule(ranges="nvtx")
    ov = _overlay(tmp_path, fake)
    _step(ov)
    # WHEN the variable appears later (nsys sets it at process start, never later)
    monkeypatch.setenv(NVTX_INJECTION_ENV, NSYS_LIB)
    _step(ov)
    # THEN the step pays no environment lookup: still no range
    assert _ranges(fake) == []
    ov.shutdown()
    # GIVEN a lane made while nsys listens WHEN the overlay shuts down THEN later spans mark nothing
    fake2 = FakeDeviceModule(ranges="nvtx")
    ov2 = _overlay(tmp_path, fake2)
    _step(ov2)
    assert _ranges(fake2)
    ov2.shutdown()
    fake2.calls.clear()
    with span(SPAN_EXPONENTIAL):
        pass
    assert _ranges(fake2) == []


def test_ascend_mstx_ranges_still_need_a_profiler(tmp_path, monkeypatch):
    # GIVEN the NVTX variable set but an Ascend lane (FAKE torch.npu with mstx): msprof records with torch_npu's
    # profiler, the only time mstx ranges are wanted
    monkeypatch.setenv(NVTX_INJECTION_ENV, NSYS_LIB)
    with _running(tmp_path, "mstx") as (fake, ov):
        # WHEN a step runs without a torch profiler THEN no mstx range
        _step(ov)
        assert _ranges(fake) == []


@pytest.mark.parametrize("profiling", [False, True])
def test_under_a_torch_profiler_and_nsys_each_span_is_one_range(tmp_path, monkeypatch, profiling):
    # GIVEN nsys listening, with or without a torch profiler also recording
    from torch.profiler import ProfilerActivity, profile

    monkeypatch.setenv(NVTX_INJECTION_ENV, NSYS_LIB)
    with _running(tmp_path) as (fake, ov), (profile(activities=[ProfilerActivity.CPU]) if profiling else nullcontext()):
        _step(ov)
    # THEN each span is pushed exactly once (never twice when both listen)
    pushes = [c[1] for c in _ranges(fake) if c[0] == "range_push"]
    assert pushes == [SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT]

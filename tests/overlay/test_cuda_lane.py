"""DEVICE CHECK: the device-stream lane on a real CUDA device (run by bench/gpu_check.sh).

This is not a core test. The core tests exercise the device lane against
``fake_device.FakeDeviceModule`` (no GPU in CI or on the development machines);
this module checks the same lane on real CUDA streams and events. It is only
collected when ``EXPO_PROF_GPU_CHECK=1`` (``tests/overlay/conftest.py`` lists
it in ``collect_ignore`` otherwise), so it is never a silently skipped test:
elsewhere it does not exist, and where it is asked for, a missing CUDA device
is a collection error, not a skip. It needs only torch and pytest (no vLLM, no
conftest fixtures: gpu_check.sh runs it with ``--noconftest``).

With ``EXPO_PROF_GPU_CHECK_OUT=DIR`` the profiler test also keeps its trace
and event log in ``DIR`` for ``python -m expo_prof analyze``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():  # asked for (EXPO_PROF_GPU_CHECK=1) but impossible: fail, never skip
    pytest.fail(f"EXPO_PROF_GPU_CHECK=1 but torch {torch.__version__} sees no CUDA device", pytrace=False)

from overlay.contract import SPAN_EXPONENTIAL  # noqa: E402
from overlay.events import EventLog  # noqa: E402
from overlay.lanes import DeviceStreamLane  # noqa: E402
from overlay.sampler import Overlay, overlay_random_sample  # noqa: E402

DEVICE = torch.device("cuda", torch.cuda.current_device())
ROWS, VOCAB, HIDDEN = 64, 152064, 4096


def _inline(probs, generators, fp64=False):  # only reached on a fallback
    raise AssertionError("the side-stream q should have been used")


def _forward(x, w, n=8):
    for _ in range(n):
        x = torch.tanh(x @ w)
    return x


def _overlay(out_dir):
    lane = lambda device, instr: DeviceStreamLane(device, instrument=instr)  # noqa: E731 - the real CUDA lane
    return Overlay(EventLog(str(out_dir), instrument=True, max_bytes=0), instrument=True, lane_factory=lane)


def _steps(ov, n):
    x = torch.randn(ROWS, HIDDEN, device=DEVICE)
    w = torch.randn(HIDDEN, HIDDEN, device=DEVICE) / HIDDEN**0.5
    logits = torch.randn(ROWS, VOCAB, device=DEVICE)
    tokens = []
    for _ in range(n):
        st = ov.begin_step(rows=ROWS, vocab=VOCAB, dtype=torch.float32, device=DEVICE, all_greedy=False, seeded_rows=0)
        _forward(x, w)
        ov.end_forward(st)
        tokens.append(overlay_random_sample(logits.softmax(-1), {}, False, inline=_inline, overlay=ov))
        assert st.used, st.fallback
    torch.cuda.synchronize()
    return tokens


def _lines(out_dir):
    (path,) = Path(out_dir).glob("expo-prof-events-*.jsonl")
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_q_from_the_side_stream_is_exp1_and_ready_for_the_consumer():
    # GIVEN the real lane, and a forward queued on the current stream after the launch
    lane = DeviceStreamLane(DEVICE, instrument=True)
    draw = lane.launch(512, VOCAB, torch.float32, DEVICE)
    _forward(torch.randn(512, HIDDEN, device=DEVICE), torch.randn(HIDDEN, HIDDEN, device=DEVICE) / HIDDEN**0.5)
    # WHEN the consumer waits on the device (no host sync) and reads q on the current stream
    q, _w0, _w1 = lane.wait(draw)
    mean, smallest = q.mean().item(), q.min().item()
    # THEN q is a complete Exp(1) draw: positive, mean 1 within 6 standard errors of 512 × vocab draws
    assert q.shape == (512, VOCAB) and q.device == DEVICE and smallest > 0
    assert abs(mean - 1.0) < 6 / (512 * VOCAB) ** 0.5, mean


def test_steps_are_used_and_logged_with_device_timing(tmp_path):
    # GIVEN the full overlay on the real lane
    ov = _overlay(tmp_path)
    # WHEN 20 steps run
    tokens = _steps(ov, 20)
    ov.shutdown()
    lines = _lines(tmp_path)
    steps = [x for x in lines if x["type"] == "step"]
    # THEN every step used the side-stream q, tokens are in the vocabulary, windows come from CUDA events
    assert len(steps) == 20 and all(s["used"] and s["timing"] == "device" for s in steps)
    assert all(int(t.min()) >= 0 and int(t.max()) < VOCAB for t in tokens)
    resolved = [s for s in steps if s["exp"] is not None and s["fwd"] is not None]
    assert len(resolved) >= 19  # at most the last step's events are unread at exit
    assert all(0 <= s["exp"][0] <= s["exp"][1] and 0 <= s["fwd"][0] <= s["fwd"][1] for s in resolved)
    # AND the draw ran beside the forward: it started before the forward ended on most steps
    beside = sum(s["exp"][0] < s["fwd"][1] for s in resolved)
    assert beside >= len(resolved) // 2, [(s["exp"], s["fwd"]) for s in resolved]
    assert lines[-1]["type"] == "summary" and lines[-1]["used"] == 20


def test_profiler_sees_the_exponential_on_a_side_stream(tmp_path):
    # GIVEN a torch.profiler (CPU + CUDA) around overlay steps
    from torch.profiler import ProfilerActivity, profile, record_function

    out = Path(os.environ.get("EXPO_PROF_GPU_CHECK_OUT") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    ov = _overlay(out)
    _steps(ov, 3)  # warm-up outside the trace
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(5):
            with record_function(f"ProfilerStep#{i}"):
                _steps(ov, 1)
    ov.shutdown()
    trace = out / "cuda-lane.pt.trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    # THEN the exponential kernel runs on another stream than the forward's GEMMs
    kernels = [e for e in events if e.get("cat") == "kernel"]
    exp_streams = {e["args"].get("stream") for e in kernels if "exponential" in e["name"]}
    gemm_streams = {e["args"].get("stream") for e in kernels if "gemm" in e["name"].lower() or "sgemm" in e["name"]}
    assert exp_streams and gemm_streams and not (exp_streams & gemm_streams), (exp_streams, gemm_streams)
    # AND the overlay's span is on the trace (host side at least)
    assert any(e.get("name") == SPAN_EXPONENTIAL for e in events)

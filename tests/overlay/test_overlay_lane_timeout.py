"""CPU lane liveness: waits time out (the step falls back inline, counted), close() joins the worker."""

from __future__ import annotations

import torch

from overlay.events import EventLog
from overlay.lanes import CpuThreadLane
from overlay.sampler import Overlay, overlay_random_sample


def test_wait_past_the_timeout_falls_back_inline_and_is_counted(tmp_path):
    # GIVEN a CPU lane whose waits time out at once, and a draw that takes a while (40 M values)
    lane = CpuThreadLane(seed=1, wait_timeout_s=0.0)
    ov = Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: lane)
    rows, vocab = 400, 100_000
    probs = torch.rand(rows, vocab)  # made before the launch: the sampler asks right after it (no race with the draw)
    step = ov.begin_step(rows=rows, vocab=vocab, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    inline_calls = []

    def inline(probs, generators, fp64):
        inline_calls.append(probs.shape)
        return probs.argmax(dim=-1)

    # WHEN the sampler asks for q before the draw is done
    tokens = overlay_random_sample(probs, {}, False, inline=inline, overlay=ov)
    # THEN the step drew inline and counts as an error fallback
    assert inline_calls == [(rows, vocab)] and tokens.shape == (rows,)
    assert step.fallback == "error" and not step.used
    ov.shutdown()
    assert ov.log.fallbacks["error"] == 1


def test_close_joins_the_worker_thread():
    # GIVEN a running CPU lane WHEN it is closed THEN its thread has ended
    lane = CpuThreadLane(seed=1)
    assert lane._thread.is_alive()
    lane.close()
    assert not lane._thread.is_alive()

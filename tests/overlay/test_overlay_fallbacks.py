"""Every fallback reason of docs/event-log.md is produced, counted and logged."""

from __future__ import annotations

import pytest
import torch

from eventlog_schema import read_log
from overlay.contract import FALLBACK_REASONS
from overlay.events import EventLog
from overlay.lanes import CpuThreadLane
from overlay.sampler import Overlay, overlay_random_sample

#: Test data drawn from its own generator: probs made after a launch must not move vLLM's
#: default generator, which the overlay's q is forked from (overlay/rng.py).
TEST_RNG = torch.Generator().manual_seed(0)

VOCAB = 32


def _overlay(tmp_path) -> Overlay:
    return Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: CpuThreadLane(seed=1))


def _probs(rows, vocab=VOCAB, dtype=torch.float32, device="cpu"):
    return torch.softmax(torch.randn(rows, vocab, generator=TEST_RNG), dim=-1).to(dtype).to(device)


def _step(ov, rows=4, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded=0, skip=None):
    step = ov.begin_step(rows=rows, vocab=vocab, dtype=dtype, device=device, all_greedy=all_greedy, seeded_rows=seeded,
                         skip=skip)
    if step is not None:
        ov.end_forward(step)
    return step


def _sample(ov, probs, vllm_random_sample, generators=None, fp64=False):
    return overlay_random_sample(probs, generators or {}, fp64, inline=vllm_random_sample, overlay=ov)


def _produce(reason, ov, vllm_random_sample):
    """Drive one step into ``reason`` through the real code paths."""
    if reason == "all_greedy":
        _step(ov, all_greedy=True)
    elif reason == "all_seeded":
        _step(ov, seeded=4)
        gens = {i: torch.Generator().manual_seed(i) for i in range(4)}
        _sample(ov, _probs(4), vllm_random_sample, gens)
    elif reason == "flashinfer":  # the runner hook saw a batch FlashInfer samples (overlay.dispatch)
        _step(ov, skip="flashinfer")
    elif reason == "rows_mismatch":  # a sampler call on a batch other than the launched one
        _step(ov, rows=4)
        _sample(ov, _probs(7), vllm_random_sample)
    elif reason == "vocab_mismatch":
        _step(ov, vocab=VOCAB)
        _sample(ov, _probs(4, vocab=VOCAB + 3), vllm_random_sample)
    elif reason == "dtype_mismatch":  # fp64 gumbel requested, float32 q launched
        _step(ov, dtype=torch.float32)
        _sample(ov, _probs(4), vllm_random_sample, fp64=True)
    elif reason == "device_mismatch":
        _step(ov)
        assert ov.take(torch.empty(4, VOCAB, device="meta"), {}, False) is None
    elif reason == "not_consumed":  # launched, then the step sampled nothing random
        _step(ov)
        _step(ov, all_greedy=True)  # the next forward closes it
    elif reason == "no_pending":  # the sampler ran with no forward step before it
        ov.steps.close_current()
        _sample(ov, _probs(4), vllm_random_sample)
    elif reason == "rng_moved":  # something drew from vLLM's generator during the forward
        _step(ov)
        torch.rand(1)
        _sample(ov, _probs(4), vllm_random_sample)
    elif reason == "error":  # the lane itself fails: the CPU lane cannot draw on "meta"
        _step(ov)
        _sample(ov, _probs(4), vllm_random_sample)
        _step(ov, device="meta")
        _sample(ov, _probs(4), vllm_random_sample)
    else:
        raise AssertionError(reason)


@pytest.mark.parametrize("reason", FALLBACK_REASONS)
def test_each_reason_is_produced_counted_and_sampling_still_works(tmp_path, vllm_random_sample, reason):
    # GIVEN a fresh overlay on the CPU lane
    ov = _overlay(tmp_path)
    # WHEN a step is driven into the fallback
    _produce(reason, ov, vllm_random_sample)
    ov.shutdown()
    # THEN the log is valid, that step carries the reason, and the summary counts it
    _, lines = read_log(tmp_path)
    steps = lines["step"]
    assert any(s["fallback"] == reason for s in steps), steps
    assert lines["summary"][-1]["fallbacks"].get(reason, 0) >= 1
    assert not any(s["used"] for s in steps if s["fallback"] == reason)


def test_fallback_draw_is_vllms_inline_draw(tmp_path, vllm_random_sample):
    # GIVEN a mismatch (more rows than launched)
    ov = _overlay(tmp_path)
    _step(ov, rows=2)
    probs = _probs(5)
    # WHEN sampled, with torch's global RNG in a known state
    torch.manual_seed(42)
    ours = _sample(ov, probs.clone(), vllm_random_sample)
    torch.manual_seed(42)
    reference = vllm_random_sample(probs.clone(), {}, False)
    ov.shutdown()
    # THEN the result is exactly vLLM's own inline draw
    assert torch.equal(ours, reference)


def test_lane_error_is_noticed_once_and_counted_every_time(tmp_path, vllm_random_sample, warnings_of_overlay):
    # GIVEN three steps whose side-lane launch fails (after a good first step)
    ov = _overlay(tmp_path)
    _step(ov)
    _sample(ov, _probs(4), vllm_random_sample)
    for _ in range(3):
        _step(ov, device="meta")
        # WHEN sampled THEN tokens still come (inline draw)
        assert _sample(ov, _probs(4), vllm_random_sample).shape == (4,)
    ov.shutdown()
    # THEN one notice and one warning, and all three steps counted as `error`
    _, lines = read_log(tmp_path)
    assert [n["code"] for n in lines["notice"]] == ["lane_error"]
    assert lines["summary"][-1]["fallbacks"] == {"error": 3}
    assert sum(r.levelname == "WARNING" for r in warnings_of_overlay) == 1


def test_second_sampler_call_in_a_step_and_warmup_calls_are_unattributed(tmp_path, vllm_random_sample):
    # GIVEN a step whose q is consumed, then a second sampler call, then a warm-up call
    ov = _overlay(tmp_path)
    _step(ov)
    _sample(ov, _probs(4), vllm_random_sample)
    _sample(ov, _probs(4), vllm_random_sample)
    ov.warmup_depth += 1
    _sample(ov, _probs(3), vllm_random_sample)
    ov.warmup_depth -= 1
    ov.shutdown()
    # THEN one step line (used), and two sampler calls counted as unattributed
    _, lines = read_log(tmp_path)
    assert len(lines["step"]) == 1 and lines["step"][0]["used"]
    assert lines["summary"][-1]["unattributed"] == 2


def test_batch_without_rows_opens_no_step(tmp_path):
    # GIVEN a forward with no requests (a DP padding / dummy batch)
    ov = _overlay(tmp_path)
    # WHEN a step is begun THEN none is opened and nothing is written
    assert ov.begin_step(rows=0, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0) is None
    ov.shutdown()
    assert list(tmp_path.glob("*.jsonl")) == []

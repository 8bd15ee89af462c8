"""Step lines the overlay writes when no forward step precedes the sampler, and the first lane error.

GIVEN the real Overlay on the CPU thread lane, WHEN the sampler runs with no
forward step before it (an unhooked vLLM variant), or the side lane fails
once, THEN the event log says exactly that: one step line per sampler call,
numbered on from the last step, with the dtype vLLM's inline draw used
(float64 under fp64 Gumbel) and fallback ``no_pending``; one notice with the
error on the first failure, and the same line in the Python log.
"""

from __future__ import annotations

import torch
from eventlog_schema import read_log  # type: ignore[import-not-found]

from overlay.events import EventLog
from overlay.lanes import CpuThreadLane
from overlay.sampler import Overlay, overlay_random_sample

#: Test data drawn from its own generator: probs made after a launch must not move vLLM's
#: default generator, which the overlay's q is forked from (overlay/rng.py).
TEST_RNG = torch.Generator().manual_seed(0)


def _overlay(tmp_path) -> Overlay:
    return Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: CpuThreadLane(seed=1))


def _probs(rows, vocab=32, dtype=torch.float32):
    return torch.softmax(torch.randn(rows, vocab, generator=TEST_RNG), dim=-1).to(dtype)


def test_sampler_calls_without_a_forward_are_their_own_steps(tmp_path, vllm_random_sample):
    ov = _overlay(tmp_path)
    # GIVEN one ordinary step (index 0), consumed
    step = ov.begin_step(rows=4, vocab=32, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    overlay_random_sample(_probs(4), {}, False, inline=vllm_random_sample, overlay=ov)
    ov.steps.close_current()
    # WHEN the sampler runs three times with no forward before it (float32, fp64 gumbel, float64 probs)
    for dtype, fp64 in ((torch.float32, False), (torch.float32, True), (torch.float64, False)):
        out = overlay_random_sample(_probs(3, dtype=dtype), {}, fp64, inline=vllm_random_sample, overlay=ov)
        assert out.shape == (3,)  # tokens still come, drawn inline
    ov.shutdown()
    _, lines = read_log(tmp_path)
    steps = lines["step"]
    # THEN steps 1, 2, 3 follow step 0, nothing launched, each with the inline draw's dtype and "no_pending"
    assert [s["step"] for s in steps] == [0, 1, 2, 3]
    assert [(s["rows"], s["vocab"], s["dtype"], s["launched"], s["used"], s["fallback"]) for s in steps[1:]] == [
        (0, 0, "float32", False, False, "no_pending"),
        (0, 0, "float64", False, False, "no_pending"),
        (0, 0, "float64", False, False, "no_pending"),
    ]
    assert lines["summary"][-1]["fallbacks"] == {"no_pending": 3}


def test_one_lane_error_is_noticed_with_its_message(tmp_path, vllm_random_sample, warnings_of_overlay):
    # GIVEN a good step, then one step whose side-lane draw fails (the CPU lane cannot draw on "meta")
    ov = _overlay(tmp_path)
    step = ov.begin_step(rows=4, vocab=32, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    overlay_random_sample(_probs(4), {}, False, inline=vllm_random_sample, overlay=ov)
    step = ov.begin_step(rows=4, vocab=32, dtype=torch.float32, device="meta", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    overlay_random_sample(_probs(4), {}, False, inline=vllm_random_sample, overlay=ov)
    ov.shutdown()
    _, lines = read_log(tmp_path)
    # THEN exactly one notice, whose text names the failure and says later ones are only counted
    (notice,) = lines["notice"]
    assert notice["code"] == "lane_error"
    assert notice["message"].startswith("side lane failed, drawing inline for that step: ")
    assert notice["message"].endswith(" (later lane errors are only counted)")
    # AND the Python log carries the same text (without the suffix), prefixed once
    (rec,) = [r for r in warnings_of_overlay if r.levelname == "WARNING"]
    assert rec.getMessage() == "expo-prof overlay: " + notice["message"].removesuffix(" (later lane errors are only counted)")
    assert lines["summary"][-1]["fallbacks"] == {"error": 1}


def test_a_forward_of_unknown_batch_size_is_a_step_with_nothing_launched(tmp_path, vllm_random_sample):
    # GIVEN three forwards whose batch the runner hook could not read, each followed by a sampler call
    ov = _overlay(tmp_path)
    for i in range(3):
        step = ov.begin_unsized_step("cpu")
        assert step.index == i and not step.launched
        ov.end_forward(step)
        out = overlay_random_sample(_probs(3), {}, False, inline=vllm_random_sample, overlay=ov)
        assert out.shape == (3,)  # drawn inline
    ov.shutdown()
    _, lines = read_log(tmp_path)
    # THEN three step lines numbered on, nothing launched, the sampler found no pending draw, the forward timed
    steps = lines["step"]
    assert [(s["step"], s["rows"], s["vocab"], s["launched"], s["used"], s["fallback"]) for s in steps] == [
        (i, 0, 0, False, False, "no_pending") for i in range(3)]
    for s in steps:
        assert s["fwd"] is not None and s["fwd"][0] <= s["fwd"][1]
    assert lines["header"][0]["backend"] == "cpu"


def test_a_later_notice_is_written_at_once_when_the_log_is_configured(tmp_path, vllm_random_sample):
    # GIVEN an overlay whose log header is known (a step ran on its lane)
    ov = _overlay(tmp_path)
    step = ov.begin_step(rows=2, vocab=32, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    overlay_random_sample(_probs(2), {}, False, inline=vllm_random_sample, overlay=ov)
    assert ov.log.configured
    # WHEN a patch reports a notice (e.g. a sampler only partly covered)
    ov.notice_later("info", "partly_applicable", "FlashInfer batches stay inline")
    # THEN it is in the file already, as given, before anything else is flushed
    _, lines = read_log(tmp_path)
    assert [(n["level"], n["code"], n["message"]) for n in lines["notice"]] == [
        ("info", "partly_applicable", "FlashInfer batches stay inline")]
    ov.shutdown()

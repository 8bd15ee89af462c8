"""Switchback inside the overlay: blocks of steps alternate between the overlay and vLLM's own sampling path.

GIVEN the overlay enabled in switchback mode with vLLM's real sampling patch and
vLLM's real ``Sampler`` on the real CPU lane, WHEN steps run as the model
runner and the sampler drive them, THEN the blocks follow the documented order
(off, on, on, off, off, on …), off steps launch nothing and sample on vLLM's
own path (the fused CPU op: the overlay's ``take`` is never asked), on steps
use the lane's ``q``, and every step line says its phase, block, batch shape,
sampler window and host end (docs/event-log.md, schema 2).
"""

from __future__ import annotations

import pytest
import torch
from eventlog_schema import read_log  # type: ignore[import-not-found]

from overlay.contract import EVENT_LOG_SCHEMA, PHASE_OFF, PHASE_ON
from overlay.events import EventLog
from overlay.sampler import switchback_phase

#: Test data drawn from its own generator: probs made after a launch must not move vLLM's
#: default generator, which the overlay's q is forked from (overlay/rng.py).
TEST_RNG = torch.Generator().manual_seed(0)

VOCAB = 64
ROWS = 4


@pytest.mark.parametrize(("block", "phases"), [
    (2, "off off on on on on off off off off on on on on off off"),
    (3, "off off off on on on on on on off off off off off off on on on"),
])
def test_blocks_run_off_on_on_off(block, phases):
    # GIVEN blocks of `block` steps WHEN the k-th sized step asks its phase
    # THEN pairs of blocks alternate their order (pair 0 off-on, pair 1 on-off …): the order the docs give
    want = phases.split()
    assert [switchback_phase(k, block) for k in range(len(want))] == want


def _metadata(rows: int, top_k: int):
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    return SamplingMetadata(
        temperature=torch.ones(rows), all_greedy=False, all_random=True,
        top_p=None, top_k=torch.full((rows,), top_k, dtype=torch.int32),
        generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=torch.zeros(rows), presence_penalties=torch.zeros(rows),
        repetition_penalties=torch.ones(rows), output_token_ids=[[] for _ in range(rows)],
        allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=LogitsProcessors(),
    )


def sample_steps(ov, sampler, n: int, *, seed: int, tokens_of=lambda i: ROWS, top_k: int = 5) -> None:
    """Run ``n`` steps as the model runner and vLLM's real ``sampler`` drive them; every token must be inside its
    row's top-k, whichever path drew it."""
    gen = torch.Generator().manual_seed(seed)
    for i in range(n):
        logits = torch.randn(ROWS, VOCAB, generator=gen)
        step = ov.begin_step(rows=ROWS, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False,
                             seeded_rows=0, tokens=tokens_of(i))
        ov.end_forward(step)
        out = sampler(logits.clone(), _metadata(ROWS, top_k)).sampled_token_ids.view(-1)
        kth = logits.topk(top_k, dim=-1).values[:, -1]
        assert bool((logits.gather(1, out.long().view(-1, 1)).view(-1) >= kth).all())


def test_off_blocks_sample_on_vllms_own_path_and_on_blocks_on_the_lane(tmp_path, topk_module):
    # GIVEN the overlay in switchback mode (blocks of 2) with vLLM's sampling patch, and vLLM's real Sampler
    from vllm.v1.sample.sampler import Sampler

    from overlay import plugin
    from overlay.patches import topk_topp

    ov = plugin.enable(log=EventLog(str(tmp_path)), patches=(topk_topp,), mode="switchback", block_steps=2)
    try:
        takes: list[int] = []
        real_take = ov.take

        def take(*args):
            takes.append(ov.steps.current.index)
            return real_take(*args)

        ov.take = take
        # WHEN vLLM's sampler samples 8 steps THEN every token is inside its row's top-k, whichever path drew it
        sample_steps(ov, Sampler(), 8, seed=3, tokens_of=lambda i: ROWS + i % 2)
        ov.shutdown()
    finally:
        plugin.unregister()
    _path, lines = read_log(tmp_path)
    header, steps = lines["header"][0], lines["step"]
    # AND the header says the mode and block length, in schema 2
    assert (header["schema"], header["mode"], header["block_steps"]) == (EVENT_LOG_SCHEMA, "switchback", 2)
    # AND the phases and blocks are the documented order: off off on on on on off off
    assert [s["phase"] for s in steps] == [switchback_phase(k, 2) for k in range(8)]
    assert [s["block"] for s in steps] == [k // 2 for k in range(8)]
    on = [s for s in steps if s["phase"] == PHASE_ON]
    off = [s for s in steps if s["phase"] == PHASE_OFF]
    # AND off steps launched nothing, fell back from nothing, and never asked the overlay for q:
    # vLLM's own forward_cpu (the fused Gumbel-argmax op) sampled them
    assert all(not s["launched"] and not s["used"] and s["fallback"] is None for s in off)
    assert takes == [s["step"] for s in on]
    # AND on steps used the lane's q
    assert all(s["launched"] and s["used"] for s in on)
    # AND every step has its batch shape, its sampler window (inside the step, after the forward) and host end
    for s in steps:
        assert s["reqs"] == ROWS and s["tokens"] == ROWS + s["step"] % 2
        assert s["sample"] is not None and s["fwd"][1] <= s["sample"][0] <= s["sample"][1] <= s["host_end"]
        assert (s["wait"] is not None) == (s["phase"] == PHASE_ON)
        if s["wait"] is not None:
            assert s["sample"][0] <= s["wait"][0] <= s["wait"][1] <= s["sample"][1]


def test_greedy_steps_count_in_the_blocks_and_say_why_nothing_was_launched(tmp_path):
    # GIVEN switchback blocks of 2, and a run whose 2nd step is all greedy
    from overlay.lanes import CpuThreadLane
    from overlay.sampler import Overlay, overlay_random_sample

    lane = CpuThreadLane(seed=1)
    ov = Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: lane, mode="switchback",
                 block_steps=2)
    inline_calls = []

    def inline(probs, generators, fp64):
        inline_calls.append(ov.steps.current.index)
        return probs.argmax(dim=-1)

    for i in range(4):
        greedy = i == 1
        step = ov.begin_step(rows=ROWS, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=greedy,
                             seeded_rows=0)
        ov.end_forward(step)
        if not greedy:  # vLLM's sampler skips random sampling for an all-greedy batch
            overlay_random_sample(torch.softmax(torch.randn(ROWS, VOCAB, generator=TEST_RNG), -1), {}, inline=inline, overlay=ov)
    ov.shutdown()
    _path, lines = read_log(tmp_path)
    steps = lines["step"]
    # THEN the greedy step still counts in its (off) block, says why nothing was launched, and has no sampler window
    assert [(s["phase"], s["block"], s["launched"], s["fallback"]) for s in steps] == [
        ("off", 0, False, None), ("off", 0, False, "all_greedy"), ("on", 1, True, None), ("on", 1, True, None)]
    assert steps[1]["sample"] is None and steps[1]["host_end"] >= steps[1]["fwd"][1]
    # AND the off step sampled inline (vLLM's own random_sample), the on steps from the lane's q
    assert inline_calls == [0]
    assert [s["used"] for s in steps] == [False, False, True, True]

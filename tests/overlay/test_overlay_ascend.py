"""The vllm-ascend patch, against FAKE vllm-ascend modules (no Ascend stack here).

vllm-ascend cannot be installed without CANN, so its two target modules are
stood in by ``FakeAscend*`` module objects with the same names and the same
shapes: ``random_sample(probs, generators)`` (two arguments) and an
``NPUModelRunner`` subclassing vLLM's real V1 ``GPUModelRunner``.
"""

from __future__ import annotations

import types

import pytest
import torch

from eventlog_schema import read_log
from overlay import plugin
from overlay.events import EventLog
from overlay.patches import ascend
from overlay.sampler import active

VOCAB = 40


def fake_ascend_sampler_module() -> types.ModuleType:
    """FAKE ``vllm_ascend.sample.sampler``: vllm-ascend's random_sample minus the NPU stream."""
    module = types.ModuleType(ascend.SAMPLER_MODULE)
    calls = []

    def random_sample(probs, generators):
        calls.append(probs.shape)
        q = torch.empty_like(probs)
        if len(generators) != probs.shape[0]:
            q.exponential_()
        for i, generator in generators.items():
            q[i].exponential_(generator=generator)
        return probs.div_(q).argmax(dim=-1).view(-1)

    module.random_sample = random_sample
    module.calls = calls
    return module


def fake_ascend_runner_module(enable_async_exponential: bool, enable_reduce_sample: bool = False) -> types.ModuleType:
    """FAKE ``vllm_ascend.worker.model_runner_v1`` with an NPUModelRunner on vLLM's real base."""
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    module = types.ModuleType(ascend.RUNNER_MODULE)

    class NPUModelRunner(GPUModelRunner):
        def __init__(self):  # the real one needs an NPU; only what the patch reads
            self.ascend_config = types.SimpleNamespace(enable_async_exponential=enable_async_exponential,
                                                       enable_reduce_sample=enable_reduce_sample)

        def _model_forward(self, num_tokens_padded, input_ids=None, positions=None, **kwargs):
            return ("forward", num_tokens_padded)

    module.NPUModelRunner = NPUModelRunner
    return module


def test_ascend_random_sample_takes_the_side_lane_q(tmp_path, vllm_available):
    # GIVEN the overlay on and the (fake) vllm-ascend sampler module patched
    sampler_module = fake_ascend_sampler_module()
    original = sampler_module.random_sample
    ov = plugin.enable(log=EventLog(str(tmp_path)), patches=())
    ascend.apply(sampler_module)
    probs = torch.softmax(torch.randn(3, VOCAB), -1)
    # WHEN a step launched q and AscendTopKTopPSampler calls random_sample(probs, generators)
    step = ov.begin_step(rows=3, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    tokens = sampler_module.random_sample(probs.clone(), {})
    # THEN the overlay's q was used, vllm-ascend's own draw not called
    assert tokens.shape == (3,) and step.used and sampler_module.calls == []
    # WHEN the next call does not fit (more rows, e.g. reduce-sample candidates)
    step = ov.begin_step(rows=3, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
    ov.end_forward(step)
    sampler_module.random_sample(torch.softmax(torch.randn(5, VOCAB), -1), {})
    # THEN vllm-ascend's own random_sample ran, with its two arguments
    assert sampler_module.calls == [torch.Size([5, VOCAB])]
    ov.shutdown()
    _, lines = read_log(tmp_path)
    assert [s["fallback"] for s in lines["step"]] == [None, "rows_mismatch"]
    # AND removal restores the very original
    ascend.remove()
    assert sampler_module.random_sample is original


def test_ascend_runner_forward_is_hooked_with_its_npu_signature(tmp_path, vllm_available):
    # GIVEN the (fake) NPU runner module patched
    runner_module = fake_ascend_runner_module(enable_async_exponential=False)
    cls = runner_module.NPUModelRunner
    plugin.enable(log=EventLog(str(tmp_path)), patches=())
    ascend.apply(runner_module)
    # THEN its own _model_forward is wrapped, and the call still passes num_tokens_padded first
    assert vars(cls)["_model_forward"].__wrapped__ is not None
    runner = cls()
    assert runner._model_forward(16, input_ids=None) == ("forward", 16)
    assert active() is not None
    ascend.remove()


@pytest.mark.parametrize(
    ("config", "flag"),
    [({"enable_async_exponential": True}, '"enable_async_exponential": false'),
     # enable_reduce_sample: the sampler sees [rows, tp*k] gathered candidates, never [rows, vocab]
     ({"enable_async_exponential": False, "enable_reduce_sample": True}, '"enable_reduce_sample": false')],
    ids=["own-async-exponential", "reduce-sample"],
)
def test_an_ascend_config_that_bypasses_the_q_means_not_applicable_before_any_draw(
        tmp_path, vllm_available, warnings_of_overlay, config, flag):
    # GIVEN vllm-ascend with its own async exponential, or its reduce-sample, on
    runner_module = fake_ascend_runner_module(**config)
    plugin.enable(log=EventLog(str(tmp_path)), patches=())
    ascend.apply(runner_module)
    # WHEN its runner is constructed
    runner_module.NPUModelRunner()
    # THEN the overlay steps aside once, naming the additional-config flag, and drew nothing
    warnings = [r.getMessage() for r in warnings_of_overlay if r.levelname == "WARNING"]
    assert len(warnings) == 1 and flag in warnings[0]
    assert active() is None
    _, lines = read_log(tmp_path)
    assert lines["step"] == [] and [n["code"] for n in lines["notice"]] == ["not_applicable"]
    ascend.remove()


def fake_310p_module(runner_module: types.ModuleType) -> types.ModuleType:
    """FAKE ``vllm_ascend._310p.model_runner_310p``: as 0.18.0 on, NPUModelRunner310's __init__ runs the
    base's, then builds ``AscendSampler310`` (vllm_ascend/_310p/sample/sampler.py), whose top-k/top-p
    sampler samples with ``_random_sample_310p`` and never calls ``random_sample``."""
    module = types.ModuleType(ascend.RUNNER_310P_MODULE)

    class AscendTopKTopPSampler310:  # FAKE, named as the real class: the name is what the overlay recognises
        def forward_native(self, logits, generators, k, p):
            raise AssertionError("not called here")

    class NPUModelRunner310(runner_module.NPUModelRunner):
        def __init__(self):
            super().__init__()
            self.sampler = types.SimpleNamespace(topk_topp_sampler=AscendTopKTopPSampler310())

        def _model_forward(self, num_tokens_padded, **kwargs):
            return ("forward310", num_tokens_padded)

    module.NPUModelRunner310 = NPUModelRunner310
    return module


def test_the_310p_runner_steps_aside_before_any_draw(tmp_path, vllm_available, warnings_of_overlay):
    # GIVEN the overlay on, the (FAKE) NPU runner and 310P runner modules patched
    runner_module = fake_ascend_runner_module(enable_async_exponential=False)
    plugin.enable(log=EventLog(str(tmp_path)), patches=())
    ascend.apply(runner_module)
    module310 = fake_310p_module(runner_module)
    ascend.apply(module310)
    # WHEN an A2/A3 runner is built THEN the overlay stays on
    runner_module.NPUModelRunner()
    assert active() is not None
    # WHEN the 310P runner is built (its own sampler, which never calls random_sample)
    module310.NPUModelRunner310()
    # THEN the overlay steps aside once, saying why, before any q was drawn
    warnings = [r.getMessage() for r in warnings_of_overlay if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "310P" in warnings[0] and "never calls random_sample" in warnings[0]
    assert active() is None
    _, lines = read_log(tmp_path)
    assert lines["header"][0]["backend"] == "npu" and lines["step"] == []
    assert [n["code"] for n in lines["notice"]] == ["not_applicable"]
    ascend.remove()


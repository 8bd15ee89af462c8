"""The model-runner patch on vLLM's real CPUModelRunner methods.

A full CPUModelRunner needs a loaded model and a distributed setup; that path
is exercised end to end against a real server (tests/e2e). Here the runner is
the real class with only the attributes its hooked methods read, all of them
real vLLM objects (InputBatch with real requests, Sampler, ModelConfig) plus a
small real torch model — so the real ``_model_forward``, ``_dummy_sampler_run``
and sampler code run under the patches.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from eventlog_schema import read_log
from overlay import plugin
from overlay.events import EventLog
from overlay.patches import model_runner, topk_topp
from overlay.patches._runner import scope

VOCAB = 96  # tiny_config_dir's vocab_size


class TinyLM(nn.Module):
    """A small real model with vLLM's forward / compute_logits signatures."""

    def __init__(self) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.embed = nn.Parameter(torch.randn(VOCAB, 64, generator=gen))
        self.mix = nn.Parameter(torch.randn(64, 64, generator=gen) / 8)
        self.head = nn.Parameter(torch.randn(VOCAB, 64, generator=gen))

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        x = self.embed[input_ids] + positions.unsqueeze(-1).float() / 100
        for _ in range(4):
            x = torch.tanh(x @ self.mix)
        return x

    def compute_logits(self, hidden):
        return hidden @ self.head.T


def _runner(tiny_config_dir, requests, top_k=20):
    from vllm.config import ModelConfig, VllmConfig
    from vllm.sampling_params import SamplingParams
    from vllm.v1.sample.sampler import Sampler
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner
    from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

    model_config = ModelConfig(model=str(tiny_config_dir), tokenizer=str(tiny_config_dir),
                               dtype="float32", max_model_len=64, skip_tokenizer_init=True)
    batch = InputBatch(max_num_reqs=8, max_model_len=64, max_num_batched_tokens=64,
                       device=torch.device("cpu"), vocab_size=VOCAB, block_sizes=[16], max_num_blocks_per_req=[4])
    for i, (temperature, seed) in enumerate(requests):
        params = SamplingParams(temperature=temperature, seed=seed, top_k=top_k)
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        batch.add_request(CachedRequestState(
            req_id=f"r{i}", prompt_token_ids=[1, 2, 3], mm_features=[], sampling_params=params,
            generator=gen, block_ids=([0],), num_computed_tokens=0, output_token_ids=[]))
    batch.refresh_metadata()
    runner = object.__new__(CPUModelRunner)  # the real class; attributes below are real vLLM objects
    runner.input_batch = batch
    runner.sampler = Sampler()
    runner.model_config = model_config
    runner.vllm_config = VllmConfig(model_config=model_config)
    runner.speculative_config = None
    runner.device = torch.device("cpu")
    runner.model = TinyLM()
    return runner


def _one_step(runner):
    """What execute_model + sample_tokens do around the hooked methods."""
    n = runner.input_batch.num_reqs
    hidden = runner._model_forward(input_ids=torch.arange(n) % VOCAB, positions=torch.arange(n))
    logits = runner.model.compute_logits(hidden)
    return runner.sampler(logits, runner.input_batch.sampling_metadata).sampled_token_ids.view(-1)


execute = scope(_one_step, "execute_depth")


@pytest.fixture
def patched(tmp_path, vllm_available):
    ov = plugin.enable(log=EventLog(str(tmp_path)), patches=(topk_topp, model_runner))
    yield ov
    plugin.unregister()


@pytest.mark.parametrize(
    ("requests", "expect"),
    [
        ([(1.0, None), (0.0, None), (0.8, 7)], {"launched": True, "used": True, "fallback": None, "rows": 3}),
        ([(0.0, None), (0.0, None)], {"launched": False, "used": False, "fallback": "all_greedy", "rows": 0}),
        ([(1.0, 3), (0.9, 4)], {"launched": False, "used": False, "fallback": "all_seeded", "rows": 0}),
    ],
    ids=["mixed", "all-greedy", "all-seeded"],
)
def test_each_forward_inside_execute_model_is_one_step(tmp_path, tiny_config_dir, patched, requests, expect):
    # GIVEN the runner and sampler patches, and a runner with real requests
    runner = _runner(tiny_config_dir, requests)
    greedy = torch.tensor([t == 0.0 for t, _ in requests])
    # WHEN vLLM's warm-up sampler run happens, then three execute_model steps
    runner._dummy_sampler_run(torch.randn(4, 64))
    outs = [execute(runner) for _ in range(3)]
    patched.shutdown()
    # THEN one step line per forward, sized from the batch, with the expected outcome
    _, lines = read_log(tmp_path)
    steps = lines["step"]
    assert len(steps) == 3
    for s in steps:
        assert {k: s[k] for k in expect} == expect
        if s["launched"]:
            assert s["vocab"] == VOCAB and s["dtype"] == "float32" and s["wait"] is not None
        assert s["fwd"] is not None
    # AND the warm-up sampler calls were drawn inline, not counted as steps
    assert lines["summary"][-1]["unattributed"] == 2
    # AND greedy rows are the model's argmax
    logits = runner.model.compute_logits(runner.model(torch.arange(len(requests)) % VOCAB, torch.arange(len(requests))))
    for out in outs:
        assert torch.equal(out[greedy], logits.argmax(-1)[greedy])


def test_forward_outside_execute_model_is_not_a_step(tmp_path, tiny_config_dir, patched):
    # GIVEN a runner WHEN its model runs outside execute_model (dummy / capture runs)
    runner = _runner(tiny_config_dir, [(1.0, None)])
    runner._model_forward(input_ids=torch.tensor([1]), positions=torch.tensor([0]))
    patched.shutdown()
    # THEN no step was opened and nothing written
    assert patched.log.steps == 0 and list(tmp_path.glob("*.jsonl")) == []


def test_seeded_request_repeats_with_the_overlay_on(tmp_path, tiny_config_dir, patched):
    # GIVEN the same seeded request twice, each next to an unseeded one
    seqs = []
    for _ in range(2):
        runner = _runner(tiny_config_dir, [(1.0, None), (1.0, 1234)])
        # WHEN five steps are sampled
        seqs.append(torch.stack([execute(runner) for _ in range(5)]))
    # THEN the seeded row's tokens repeat exactly, while the side-lane q was used
    assert torch.equal(seqs[0][:, 1], seqs[1][:, 1])
    assert patched.log.used == 10


def test_overlay_error_in_the_runner_hook_disables_it_and_vllm_keeps_going(tmp_path, tiny_config_dir, warnings_of_overlay):
    # GIVEN the overlay on with an event log that cannot be created (its parent is a file)
    import vllm.v1.worker.gpu_model_runner as runner_module

    from overlay.sampler import active

    original_forward = vars(runner_module.GPUModelRunner)["_model_forward"]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    plugin.enable(log=EventLog(str(blocker / "sub")), patches=(topk_topp, model_runner))
    runner = _runner(tiny_config_dir, [(1.0, None), (0.0, None)])
    # WHEN steps run (the first one fails inside the overlay, writing its placement notice)
    outs = [execute(runner) for _ in range(3)]
    # THEN every step still produced tokens, the overlay is off, vLLM's methods are back,
    # and exactly one warning said why
    assert all(o.shape == (2,) for o in outs)
    assert active() is None
    assert vars(runner_module.GPUModelRunner)["_model_forward"] is original_forward
    warnings = [r.getMessage() for r in warnings_of_overlay if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "disabled after an internal error" in warnings[0]


# -- FlashInfer batches (overlay.dispatch) and dummy runs inside execute_model ----------------------------


class FakeFlashInfer:
    """FAKE ``flashinfer_sample`` (FlashInfer has no CPU build): records the batches vLLM sent to it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, logits, k, p, generators):
        self.calls += 1
        return logits.argmax(dim=-1)


@pytest.mark.parametrize(
    ("requests", "top_k", "expect"),
    [
        ([(1.0, None), (0.8, None)], 20, {"launched": False, "used": False, "fallback": "flashinfer"}),
        ([(1.0, None), (0.8, 7)], 20, {"launched": True, "used": True, "fallback": None}),
        ([(1.0, None), (0.8, None)], -1, {"launched": True, "used": True, "fallback": None}),
    ],
    ids=["top-k-no-seed-goes-to-flashinfer", "a-seeded-row-goes-native", "no-top-k-goes-native"],
)
def test_flashinfer_batches_draw_nothing_and_the_others_use_q(
        tmp_path, tiny_config_dir, patched, topk_module, monkeypatch, requests, top_k, expect):
    # GIVEN vLLM's real Sampler dispatching through forward_cuda (what __init__ picks on CUDA with
    # FlashInfer), vLLM's FlashInfer call stood in by a FAKE, and a batch with or without top-k / seeds
    fake = FakeFlashInfer()
    monkeypatch.setattr(topk_module, "flashinfer_sample", fake)
    runner = _runner(tiny_config_dir, requests, top_k=top_k)
    inner = runner.sampler.topk_topp_sampler
    inner.forward = inner.forward_cuda
    # WHEN execute_model runs two steps
    for _ in range(2):
        execute(runner)
    patched.shutdown()
    # THEN q was drawn exactly for the batches vLLM's dispatch takes to random_sample, and used there;
    # the FlashInfer batches drew nothing and say why
    _, lines = read_log(tmp_path)
    assert [{k: s[k] for k in expect} for s in lines["step"]] == [expect, expect]
    assert patched.log.launched == (0 if expect["fallback"] else 2)
    assert fake.calls == (2 if expect["fallback"] else 0)


def test_the_dispatch_rule_is_vllms_own_forward_cuda(topk_module, monkeypatch):
    # GIVEN the installed vLLM's real TopKTopPSampler.forward_cuda, with FlashInfer stood in by a FAKE
    # and its native path recorded
    from overlay.dispatch import FLASHINFER_FORWARD, reaches_random_sample

    fake = FakeFlashInfer()
    monkeypatch.setattr(topk_module, "flashinfer_sample", fake)
    sampler = topk_module.TopKTopPSampler()
    native = []
    sampler.forward_native = lambda logits, generators, k, p: native.append(1) or (logits.argmax(-1), None)
    logits = torch.zeros(2, VOCAB)
    k, p = torch.tensor([5, 5]), torch.tensor([0.9, 0.9])
    for has_k in (False, True):
        for has_p in (False, True):
            for gens in ({}, {1: torch.Generator()}):
                for fp64 in (False, True):
                    # WHEN forward_cuda dispatches a batch with these properties
                    sampler.use_fp64_gumbel = fp64
                    native.clear()
                    fake.calls = 0
                    sampler.forward_cuda(logits, gens, k if has_k else None, p if has_p else None)
                    # THEN the overlay predicted the same path
                    predicted = reaches_random_sample(FLASHINFER_FORWARD, has_k=has_k, has_p=has_p,
                                                      has_generators=bool(gens), use_fp64_gumbel=fp64)
                    assert (bool(native), bool(fake.calls)) == (predicted, not predicted), (has_k, has_p, gens, fp64)


def test_a_dummy_run_inside_execute_model_is_not_a_step(tmp_path, tiny_config_dir, patched):
    # GIVEN a runner whose execute_model runs vLLM's _dummy_run when this data-parallel rank has no
    # requests (and the real forward otherwise), both wrapped by the real runner wrappers
    from overlay.patches._runner import patch_runner_class
    from overlay.patches._util import Patcher
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner

    class DataParallelRunner(CPUModelRunner):
        def execute_model(self, idle):
            if idle:
                return self._dummy_run(4)
            return _one_step(self)

        def _dummy_run(self, num_tokens):
            return self._model_forward(input_ids=torch.zeros(num_tokens, dtype=torch.long),
                                       positions=torch.arange(num_tokens))

    patcher = Patcher()
    patch_runner_class(patcher, DataParallelRunner)
    try:
        runner = object.__new__(DataParallelRunner)
        vars(runner).update(vars(_runner(tiny_config_dir, [(1.0, None)])))
        # WHEN execute_model runs the dummy batch twice, then one real step
        runner.execute_model(True)
        runner.execute_model(True)
        runner.execute_model(False)
    finally:
        patcher.undo()
    patched.shutdown()
    # THEN only the real step is a step: the dummy runs drew nothing
    _, lines = read_log(tmp_path)
    assert [(s["launched"], s["used"]) for s in lines["step"]] == [(True, True)]
    assert patched.log.launched == 1

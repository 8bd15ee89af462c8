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


def _runner(tiny_config_dir, requests):
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
        params = SamplingParams(temperature=temperature, seed=seed, top_k=20)
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
    assert lines["summary"][0]["unattributed"] == 2
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

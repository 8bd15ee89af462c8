"""The overlay's random_sample against vLLM 0.32's own (real vLLM code).

Distributions are compared with chi-square goodness-of-fit over many draws
with fixed seeds, after temperature and top-k/top-p applied the vLLM way
(``Sampler.apply_temperature``, ``apply_top_k_top_p``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from overlay.events import EventLog
from overlay.lanes import CpuThreadLane
from overlay.sampler import Overlay, overlay_random_sample

VOCAB = 64
REPLICAS = 2500  # rows per distribution in one batch
STEPS = 4  # batches -> 10 000 draws per distribution
P_MIN = 1e-3


def _overlay(tmp_path, seed=1234) -> Overlay:
    return Overlay(EventLog(str(tmp_path)), lane_factory=lambda device, instrument: CpuThreadLane(seed=seed))


def _processed_probs(dtype=torch.float32):
    """Four target distributions made the vLLM way from fixed logits."""
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p
    from vllm.v1.sample.sampler import Sampler

    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(4, VOCAB, generator=gen) * 2.0
    temperature = torch.tensor([1.0, 0.7, 1.3, 1.0])
    top_k = torch.tensor([VOCAB, 10, VOCAB, 5], dtype=torch.int32)
    top_p = torch.tensor([1.0, 1.0, 0.8, 0.9])
    logits = Sampler.apply_temperature(logits, temperature, all_random=True)
    logits = apply_top_k_top_p(logits, top_k, top_p)
    return logits.softmax(dim=-1, dtype=torch.float32)


def _draw(sample, probs, steps=STEPS):
    """Token counts per distribution over ``steps`` batches of REPLICAS rows each."""
    batch = probs.repeat_interleave(REPLICAS, dim=0)
    counts = np.zeros((probs.shape[0], VOCAB), dtype=np.int64)
    for _ in range(steps):
        tokens = sample(batch.clone()).view(probs.shape[0], REPLICAS)
        for row in range(probs.shape[0]):
            counts[row] += np.bincount(tokens[row].numpy(), minlength=VOCAB)
    return counts


def _gof_pvalue(counts, probs):
    """Chi-square goodness of fit; cells with expected < 5 pooled into one."""
    n = counts.sum()
    expected = probs.double().numpy() * n
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    exp = exp * obs.sum() / exp.sum()
    return stats.chisquare(obs, exp).pvalue


def _overlay_sampler(ov, vllm_random_sample, use_fp64=False):
    def sample(batch):
        rows = batch.shape[0]
        dtype = torch.float64 if use_fp64 else torch.float32
        step = ov.begin_step(rows=rows, vocab=VOCAB, dtype=dtype, device="cpu", all_greedy=False, seeded_rows=0)
        ov.end_forward(step)
        return overlay_random_sample(batch, {}, use_fp64, inline=vllm_random_sample, overlay=ov)

    return sample


@pytest.mark.parametrize("use_fp64", [False, True])
def test_overlay_matches_vllm_distribution_with_temperature_topk_topp(tmp_path, vllm_random_sample, use_fp64):
    # GIVEN four distributions processed the vLLM way (temperature, top-k, top-p)
    probs = _processed_probs()
    ov = _overlay(tmp_path)
    # WHEN 10 000 tokens per distribution are drawn through the overlay and through vLLM itself
    torch.manual_seed(99)
    reference = _draw(lambda b: vllm_random_sample(b, {}, use_fp64), probs)
    ours = _draw(_overlay_sampler(ov, vllm_random_sample, use_fp64), probs)
    ov.shutdown()
    # THEN every step really used the side-lane q (the test measures the overlay path)
    assert ov.log.used == STEPS and ov.log.launched == STEPS
    for row in range(probs.shape[0]):
        # THEN both fit the target distribution ...
        assert _gof_pvalue(ours[row], probs[row]) > P_MIN, (row, ours[row])
        assert _gof_pvalue(reference[row], probs[row]) > P_MIN
        # ... and agree with each other (chi-square test of homogeneity)
        seen = (ours[row] + reference[row]) > 0
        table = np.stack([ours[row][seen], reference[row][seen]])
        assert stats.chi2_contingency(table).pvalue > P_MIN
        # ... and no token of probability 0 (masked by top-k / top-p) ever came out
        zero = (probs[row] == 0).numpy()
        assert ours[row][zero].sum() == 0 and reference[row][zero].sum() == 0
    # (the masks did remove tokens, so the last check had something to check)
    assert int((probs == 0).sum()) > 50


def test_a_wrong_sampler_would_fail_the_fit(tmp_path):
    # GIVEN the same targets WHEN tokens are drawn uniformly over the allowed set (a wrong sampler)
    probs = _processed_probs()
    gen = torch.Generator().manual_seed(3)

    def uniform(batch):
        allowed = (batch > 0).double()
        return torch.multinomial(allowed, 1, generator=gen).view(-1)

    counts = _draw(uniform, probs, steps=1)
    # THEN the goodness-of-fit check rejects it (the equivalence test has teeth)
    assert min(_gof_pvalue(counts[row], probs[row]) for row in range(4)) < 1e-6


def test_seeded_rows_give_exactly_vllms_tokens(tmp_path, vllm_random_sample):
    # GIVEN a batch where rows 0 and 2 have their own seeded generators
    probs = _processed_probs()
    batch = probs.repeat(3, 1)  # 12 rows
    seeds = {0: 11, 2: 22, 7: 33}

    def generators():
        return {i: torch.Generator().manual_seed(s) for i, s in seeds.items()}

    ov = _overlay(tmp_path)
    ours, reference = [], []
    gens_ours, gens_ref = generators(), generators()
    # WHEN ten steps are sampled through the overlay and through vLLM, each with its own generators
    for _ in range(10):
        step = ov.begin_step(rows=12, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=3)
        ov.end_forward(step)
        ours.append(overlay_random_sample(batch.clone(), gens_ours, False, inline=vllm_random_sample, overlay=ov))
        reference.append(vllm_random_sample(batch.clone(), gens_ref, False))
    ov.shutdown()
    ours_t, ref_t = torch.stack(ours), torch.stack(reference)
    # THEN the seeded rows are token-for-token identical to vLLM's (the overlay q was used)
    assert ov.log.used == 10
    for i in seeds:
        assert torch.equal(ours_t[:, i], ref_t[:, i])
    # AND the unseeded rows came from the side lane, not from a copy of vLLM's stream
    unseeded = [i for i in range(12) if i not in seeds]
    assert not torch.equal(ours_t[:, unseeded], ref_t[:, unseeded])


def test_all_seeded_batch_launches_nothing_and_repeats(tmp_path, vllm_random_sample):
    # GIVEN every row seeded (vLLM draws no batch noise then)
    probs = _processed_probs()
    ov = _overlay(tmp_path)
    runs = []
    for _ in range(2):
        gens = {i: torch.Generator().manual_seed(100 + i) for i in range(4)}
        # WHEN the same seeded batch is sampled twice
        step = ov.begin_step(rows=4, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=4)
        ov.end_forward(step)
        runs.append(overlay_random_sample(probs.clone(), gens, False, inline=vllm_random_sample, overlay=ov))
    ov.shutdown()
    # THEN nothing was launched, the reason is counted, and the tokens repeat exactly
    assert ov.log.launched == 0 and ov.log.fallbacks["all_seeded"] == 2
    assert torch.equal(runs[0], runs[1])


def test_unseeded_noise_is_vllms_own_inline_draw_bit_for_bit(tmp_path, vllm_random_sample):
    # GIVEN vLLM's default generator seeded (as vLLM's --seed does) and an unseeded batch
    probs = _processed_probs().repeat(50, 1)
    torch.manual_seed(2024)
    want = vllm_random_sample(probs.clone(), {}, False)
    after_inline = torch.default_generator.get_state()
    for run in range(2):
        # WHEN the overlay (a CPU lane seeded differently each run) launches q and the sampler takes it
        torch.manual_seed(2024)
        ov = _overlay(tmp_path / str(run), seed=run)
        step = ov.begin_step(rows=200, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
        ov.end_forward(step)
        got = overlay_random_sample(probs.clone(), {}, False, inline=vllm_random_sample, overlay=ov)
        ov.shutdown()
        # THEN the side lane's q was used, the tokens are vLLM's inline tokens, and the default
        # generator is where vLLM's inline draw leaves it (a fixed --seed keeps runs repeatable)
        assert step.used
        assert torch.equal(got, want)
        assert torch.equal(torch.default_generator.get_state(), after_inline)


def test_greedy_rows_untouched_in_a_mixed_batch_through_vllms_sampler(tmp_path, topk_module):
    # GIVEN the plugin's sampling patch applied, and vLLM's real Sampler built afterwards
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata
    from vllm.v1.sample.sampler import Sampler

    from overlay import plugin
    from overlay.patches import topk_topp

    ov = plugin.enable(log=EventLog(str(tmp_path)), patches=(topk_topp,))
    sampler = Sampler()
    rows = 6
    temperature = torch.tensor([0.0, 1.0, 0.0, 0.8, 0.0, 1.2])
    greedy = temperature == 0
    metadata = SamplingMetadata(
        temperature=temperature, all_greedy=False, all_random=False,
        top_p=torch.full((rows,), 0.95), top_k=torch.full((rows,), 20, dtype=torch.int32),
        generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=torch.zeros(rows), presence_penalties=torch.zeros(rows),
        repetition_penalties=torch.ones(rows), output_token_ids=[[] for _ in range(rows)],
        allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=LogitsProcessors(),
    )
    gen = torch.Generator().manual_seed(5)
    for _ in range(20):
        logits = torch.randn(rows, VOCAB, generator=gen)
        step = ov.begin_step(rows=rows, vocab=VOCAB, dtype=torch.float32, device="cpu", all_greedy=False, seeded_rows=0)
        ov.end_forward(step)
        # WHEN vLLM's sampler samples the mixed batch
        out = sampler(logits.clone(), metadata).sampled_token_ids.view(-1)
        # THEN greedy rows are exactly the argmax, and the random rows stay inside their top-k
        assert torch.equal(out[greedy], logits.argmax(dim=-1)[greedy])
        kth = logits.topk(20, dim=-1).values[:, -1]
        chosen = logits.gather(1, out.long().view(-1, 1)).view(-1)
        assert bool((chosen >= kth).all())
    # AND the random branch really consumed the side-lane q (forward_cpu took the native path)
    assert ov.log.used == 20
    assert sampler.topk_topp_sampler.forward.__name__ == "forward_cpu"


def test_the_final_argmax_is_vllms_own_for_every_dtype_pair_and_shape(topk_module):
    """GIVEN probs and noise q of the same dtype and of mixed dtypes (float32 probs, fp64-gumbel q), as a batch
    and as one row
    WHEN overlay's sample_with_noise and vLLM's own sample_with_exponential_noise pick the tokens
    THEN they pick the same tokens, also where only fp64 arithmetic tells two candidates apart.
    """
    from overlay.sampler import sample_with_noise

    vllm_final = topk_module.sample_with_exponential_noise
    g = torch.Generator().manual_seed(7)
    probs = torch.softmax(torch.randn(6, 50, generator=g), dim=-1)
    cases = [
        (probs, torch.empty_like(probs).exponential_(generator=g)),
        (probs, torch.empty(6, 50, dtype=torch.float64).exponential_(generator=g)),
        (probs[0], torch.empty(50).exponential_(generator=g)),
        # equal probs, q differing by 1e-12: 1/q tells them apart in float64, not after a float32 division
        (torch.ones(1, 2), torch.tensor([[1.0, 1.0 - 1e-12]], dtype=torch.float64)),
    ]
    for p, q in cases:
        want = vllm_final(p.clone(), q.clone())
        got = sample_with_noise(p.clone(), q.clone())
        assert torch.equal(got, want) and got.shape == want.shape, (p.shape, q.dtype)
    assert sample_with_noise(torch.ones(1, 2), torch.tensor([[1.0, 1.0 - 1e-12]], dtype=torch.float64)).tolist() == [1]

"""TEST-ONLY vLLM plugin: a deliberately broken sampler, for ``tests/verify``.

Never installed: a test puts this folder on the server's ``PYTHONPATH``, where
importlib.metadata finds the ``vllm.general_plugins`` entry point of the
``.dist-info`` beside it. It does nothing unless ``EXPO_PROF_TEST_BROKEN_SAMPLER``
names a fault AND the overlay switch is on, so it plays an overlay bug:

* ``greedy`` — greedy rows are sampled (softmax + multinomial instead of the
  argmax): the bug the original feature's review found;
* ``topk`` — top-k is ignored (top-p still applied), so tokens outside the top k
  are sampled;
* ``greedy,topk`` — both at once (each is caught by its own check: one server
  start instead of two);
* ``die`` — the engine process exits (os._exit) at the
  ``EXPO_PROF_TEST_BROKEN_AFTER``-th sampler call (default 100), overlay on or
  off: a server dying mid-run.
"""

from __future__ import annotations

import os

ENV = "EXPO_PROF_TEST_BROKEN_SAMPLER"


def register() -> None:
    fault = os.environ.get(ENV, "")
    if fault == "die":
        from overlay import importhook

        importhook.when_imported("vllm.v1.sample.sampler", _die_later)
        return
    if not fault or os.environ.get("EXPO_PROF_ASYNC_EXPONENTIAL", "0") not in ("1", "true", "on", "yes"):
        return
    from overlay import importhook  # the overlay's own post-import hook: patch once vLLM imports the sampler

    faults = set(fault.split(","))
    if faults - {"greedy", "topk"}:
        raise SystemExit(f"{ENV}={fault!r}: use greedy, topk, greedy,topk or die")
    if "greedy" in faults:
        importhook.when_imported("vllm.v1.sample.sampler", _break_greedy)
    if "topk" in faults:
        importhook.when_imported("vllm.v1.sample.ops.topk_topp_sampler", _ignore_top_k)


def _break_greedy(module) -> None:
    import torch

    def greedy_sample(logits):
        return torch.multinomial(logits.float().softmax(dim=-1), 1).view(-1)

    module.Sampler.greedy_sample = staticmethod(greedy_sample)


def _ignore_top_k(module) -> None:
    original = module.apply_top_k_top_p

    def apply_top_k_top_p(logits, k, p, *args, **kwargs):
        return original(logits, None, p, *args, **kwargs)

    module.apply_top_k_top_p = apply_top_k_top_p


def _die_later(module) -> None:
    original = module.Sampler.forward
    calls = [0]
    after = int(os.environ.get("EXPO_PROF_TEST_BROKEN_AFTER", "100"))

    def forward(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] >= after:
            os._exit(17)
        return original(self, *args, **kwargs)

    module.Sampler.forward = forward

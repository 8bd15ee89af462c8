"""Which batches reach ``random_sample``: vLLM's own sampler dispatch, mirrored.

The overlay draws ``q`` before the forward pass, so it must decide then —
from what the sampler instance and the batch's sampling metadata say —
whether vLLM's sampler will call ``random_sample`` for this batch. A ``q``
drawn for a batch that never gets there is pure cost (and was logged
``not_consumed``).

FlashInfer (``TopKTopPSampler.forward_cuda``, vLLM's default top-k/top-p
sampler on CUDA with the V1 runner): ``Sampler.sample`` calls the
top-k/top-p sampler with ``sampling_metadata.generators``, ``.top_k`` and
``.top_p`` (every release 0.10 - 0.33, ``vllm/v1/sample/sampler.py``), and
``forward_cuda`` goes to ``forward_native`` (hence ``random_sample``) when

* 0.10.0: ``k is None and p is None`` (``random_sample`` directly), or
  ``generators`` (``forward_native``);
* 0.10.2 - 0.22: ``(k is None and p is None) or generators``;
* 0.23 - 0.33: the same, or ``self.use_fp64_gumbel`` (the attribute exists
  from 0.23; absent it is False);

otherwise ``flashinfer_sample`` samples the batch with its own kernel and
``random_sample`` is never called. ``logprobs_mode`` needs no rule here: a
processed-logprobs mode makes ``__init__`` pick ``forward_native`` instead of
``forward_cuda`` for the instance, which :func:`reaches_random_sample` sees.
tools/overlay_matrix.py runs each release's real ``forward_cuda`` against
:func:`reaches_random_sample` on every combination of these inputs.

Stdlib only: nothing here imports torch or vLLM.
"""

from __future__ import annotations

from typing import Any

#: The bound method name of vLLM's FlashInfer dispatch on a ``TopKTopPSampler`` instance.
FLASHINFER_FORWARD = "forward_cuda"
#: Fallback reason of a step whose batch FlashInfer samples (nothing launched).
SKIP_FLASHINFER = "flashinfer"


def topk_topp_forward(sampler: Any) -> str:
    """The name of the forward a vLLM ``Sampler`` (or a ``TopKTopPSampler``) dispatches to."""
    inner = getattr(sampler, "topk_topp_sampler", sampler)
    return getattr(getattr(inner, "forward", None), "__name__", "")


def reaches_random_sample(forward: str, *, has_k: bool, has_p: bool, has_generators: bool,
                          use_fp64_gumbel: bool) -> bool:
    """Whether a batch with these properties reaches ``random_sample`` through ``forward``.

    Only FlashInfer's ``forward_cuda`` bypasses it per batch; every other
    forward the overlay stays on for (``forward_native``, the patched
    ``forward_cpu``, vllm-ascend's) reaches it for every non-greedy batch.
    """
    if forward != FLASHINFER_FORWARD:
        return True
    return (not has_k and not has_p) or has_generators or use_fp64_gumbel


def skip_reason(sampler: Any, metadata: Any) -> str | None:
    """Why nothing should be drawn for this batch (None: vLLM will call ``random_sample``)."""
    inner = getattr(sampler, "topk_topp_sampler", sampler)
    reaches = reaches_random_sample(
        topk_topp_forward(sampler),
        has_k=getattr(metadata, "top_k", None) is not None,
        has_p=getattr(metadata, "top_p", None) is not None,
        has_generators=bool(getattr(metadata, "generators", None)),
        use_fp64_gumbel=bool(getattr(inner, "use_fp64_gumbel", getattr(sampler, "use_fp64_gumbel", False))),
    )
    return None if reaches else SKIP_FLASHINFER

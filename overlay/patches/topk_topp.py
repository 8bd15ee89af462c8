"""Patch: vLLM V1 sampling — consume the side-lane ``q`` in ``random_sample``.

Target: ``vllm.v1.sample.ops.topk_topp_sampler`` — the module-level
``random_sample`` (``TopKTopPSampler.forward_native`` calls it by its global
name), ``TopKTopPSampler.forward_cpu`` and ``TopKTopPSampler.__init__``.

Why:
* ``random_sample`` is where vLLM draws ``q.exponential_()`` inline; the
  replacement takes the ``q`` launched before the forward instead
  (:func:`overlay.sampler.overlay_random_sample`), same semantics otherwise.
* ``forward_cpu`` (vLLM's CPU default) samples with a fused C++ Gumbel op that
  draws its own noise, so nothing could be overlapped. With the overlay on it
  takes vLLM's native path instead (apply_top_k_top_p → softmax →
  random_sample) — the path vLLM itself uses on POWER / RISC-V and for fp64
  gumbel. Seeded rows then use their generator the way ``random_sample`` does,
  so a seeded request repeats exactly with the overlay on. In a switchback
  ``off`` block it calls the original (the fused op), so the two phases
  compare the overlay with exactly what vLLM does without it. With three arms
  (:mod:`overlay.arms`) that is the ``native`` block, and the ``off`` block
  takes the native path with vLLM's own inline ``random_sample`` (the
  exponential drawn on the forward's thread after it). Both wrappers time the
  sampler call (the step's ``sample`` window).
* ``__init__`` picks the sampling kernel per instance (FlashInfer on CUDA, a
  fused XPU kernel, ROCm aiter). The XPU and aiter kernels never call
  ``random_sample``: the overlay says so once, naming the flag that selects
  the native path, and steps aside (all patches removed). FlashInfer's
  ``forward_cuda`` still calls ``random_sample`` for batches without
  top-k/top-p (and with seeded rows): the overlay stays on, says once which
  batches it cannot reach, and draws nothing for those (the runner hook asks
  :mod:`overlay.dispatch` before each launch).

How: module attributes and class methods replaced through a
:class:`~overlay.patches._util.Patcher`; every replacement checks at call time
whether the overlay is still active and otherwise calls the original (samplers
built while patched keep working after :func:`remove`).

On vLLM 0.34 and later (Model Runner V1 removed) the module still exists but
holds only FlashInfer / top-k helpers: no ``TopKTopPSampler``, no
``random_sample``. The patch then steps aside with the V2-only notice
(:func:`overlay.sourcecheck.v2_only_message`) instead of reading
attributes that are not there — on the half-initialised module the import
hook hands over, that AttributeError reads "(most likely due to a circular
import)" and used to switch the overlay off as an internal error.

Remove when: the oldest vLLM supported has no V1 ``random_sample`` any more
(Model Runner V2 only).
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from overlay import guard
from overlay.patches._util import Patcher, observe_init
from overlay.sampler import active, overlay_random_sample, sample_with_noise, sampler_window

TARGETS = ("vllm.v1.sample.ops.topk_topp_sampler",)

#: Sampler variants that bypass ``random_sample``: what they are, and the flag
#: that makes vLLM take ``forward_native`` instead.
BYPASSING_FORWARDS = {
    "forward_xpu": ("the fused XPU sampling kernel", "VLLM_XPU_USE_SAMPLER_KERNEL=0", "xpu"),
    # processed_logits makes vLLM pick forward_native without switching off
    # every other aiter kernel (VLLM_ROCM_USE_AITER=0 would).
    "forward_hip": ("the ROCm aiter sampler", "--logprobs-mode processed_logits", "cuda"),
}
#: FlashInfer: forward_cuda still calls forward_native (so random_sample) for
#: batches without top-k/top-p and for batches with seeded rows; only the other
#: batches bypass the overlay, which draws nothing for them (overlay.dispatch:
#: their steps fall back as ``flashinfer``).
PARTIAL_FORWARDS = {
    "forward_cuda": (
        "FlashInfer samples batches that use top-k/top-p itself (nothing is drawn for them: their "
        "steps say fallback flashinfer); batches without them, or with seeded rows, use the overlay. "
        "VLLM_USE_FLASHINFER_SAMPLER=0 or --logprobs-mode processed_logits sends every batch "
        "through random_sample"
    ),
}
_partial_said: set[str] = set()

_patcher = Patcher()


def takes_fp64_flag(original: Any) -> bool:
    """Whether vLLM's ``random_sample`` has the third ``use_fp64_gumbel`` parameter.

    vLLM 0.10 - 0.22 (and every vllm-ascend) define ``random_sample(probs,
    generators)``; ``use_fp64_gumbel`` arrived in 0.23. The replacement must
    take exactly what the original takes: calling a two-argument original
    with three arguments is the TypeError that killed the engine at warm-up.
    """
    import inspect

    try:
        params = inspect.signature(original, follow_wrapped=False).parameters
    except (TypeError, ValueError):
        return True
    return "use_fp64_gumbel" in params or len(params) >= 3


def make_random_sample(original: Any, finish: Any, draw_inline: Any = None) -> Any:
    """The replacement for vLLM's ``random_sample``, with the original's own parameters.

    ``draw_inline``: what a three-arm switchback ``off`` block samples with when
    the original does not draw inline itself (vllm-ascend's draws on a side
    stream); None: the original (vLLM's draws inline).
    """
    if takes_fp64_flag(original):

        @functools.wraps(original)
        def random_sample(probs: Any, generators: dict, use_fp64_gumbel: bool = False) -> Any:
            return overlay_random_sample(
                probs, generators, use_fp64_gumbel, inline=original, finish=finish, draw_inline=draw_inline
            )

    else:

        @functools.wraps(original)
        def random_sample(probs: Any, generators: dict) -> Any:
            return overlay_random_sample(
                probs, generators, False, inline=lambda p, g, _fp64: original(p, g), finish=finish,
                draw_inline=draw_inline,
            )

    return random_sample


def check_sampler_kind(sampler: Any) -> None:
    """Step aside (once) when ``sampler`` was built with a bypassing kernel."""
    name = getattr(getattr(sampler, "forward", None), "__name__", "")
    if name in PARTIAL_FORWARDS and name not in _partial_said:
        _partial_said.add(name)
        guard.partly_applicable(PARTIAL_FORWARDS[name])
    if name in BYPASSING_FORWARDS:
        what, flag, backend = BYPASSING_FORWARDS[name]
        guard.not_applicable(
            f"this vLLM samples with {what}, which draws its own noise and never "
            f"calls random_sample; set {flag} to let the overlay apply",
            backend,
        )


def apply(module: ModuleType) -> None:
    """Replace ``random_sample`` and wrap ``TopKTopPSampler`` in ``module``."""
    if _patcher.applied:
        return
    if not (hasattr(module, "TopKTopPSampler") and hasattr(module, "random_sample")):
        # vLLM >= 0.34: Model Runner V1 (and its sampler) removed; nothing to hook.
        from overlay.patches.not_applicable import platform_backend
        from overlay.sourcecheck import v2_only_message

        guard.not_applicable(v2_only_message(), platform_backend())
        return
    cls = module.TopKTopPSampler
    original_random_sample = module.random_sample
    finish = getattr(module, "sample_with_exponential_noise", sample_with_noise)
    _patcher.set(module, "random_sample", make_random_sample(original_random_sample, finish))

    observe_init(_patcher, cls, check_sampler_kind)

    if hasattr(cls, "forward_cpu"):
        original_forward_cpu = cls.forward_cpu

        @functools.wraps(original_forward_cpu)
        def forward_cpu(self: Any, logits: Any, generators: dict, k: Any, p: Any) -> Any:
            ov = active()
            if ov is None:
                return original_forward_cpu(self, logits, generators, k, p)
            with sampler_window(ov):
                if ov.native_sampling():
                    return self.forward_native(logits, generators, k, p)
                # The switchback arm of vLLM as shipped ("off" of two arms, "native" of three): its own CPU path.
                return original_forward_cpu(self, logits, generators, k, p)

        _patcher.set(cls, "forward_cpu", forward_cpu)


def remove() -> None:
    """Restore ``random_sample`` and the ``TopKTopPSampler`` methods."""
    _patcher.undo()
    _partial_said.clear()

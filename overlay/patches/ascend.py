"""Patch: vllm-ascend's NPU model runner (V1) and its sampler.

Targets (applied only where vllm-ascend is installed and imports them):
* ``vllm_ascend.worker.model_runner_v1.NPUModelRunner`` — ``execute_model``,
  its forward seam (``_model_forward`` from 0.15, NPU signature:
  ``num_tokens_padded`` first; ``_generate_process_reqs_hidden_states`` on
  0.13 - 0.14, which have no ``_model_forward`` of their own), the warm-up
  methods it overrides, and ``__init__``;
* ``vllm_ascend._310p.model_runner_310p.NPUModelRunner310`` — its own
  ``_model_forward`` override, and ``__init__`` (observed);
* ``vllm_ascend.sample.sampler.random_sample`` — what
  ``AscendTopKTopPSampler.forward_native`` calls by its global name
  (``(probs, generators)``, no fp64 gumbel).

Why: the NPU runner overrides the V1 methods the generic patch hooks, and the
Ascend sampler has its own ``random_sample`` (drawn on a global side stream,
then waited with ``wait_stream``, without ``record_stream`` on 0.13 - 0.25:
the default path vllm-ascend #13394 fixed, in 0.26.0rc1; it is also the
overlay's fallback there, and the ``native`` arm of a three-arm switchback,
whose ``off`` arm draws inline on the compute stream instead:
:func:`overlay.arms.inline_random_sample`). The overlay launches ``q`` before the forward on its
own side stream, waits with a device event, and keeps ``q`` alive with
``record_stream``.

vllm-ascend's own ``enable_async_exponential`` (``--additional-config``,
0.13 - 0.24; removed in 0.25) replaces ``random_sample`` by its pre-drawn ``q`` with a host synchronise; with
it on the two would fight, so the overlay says so once and steps aside.

It also steps aside, once, at the runner's construction — before any ``q``
is drawn — where no step would use one:

* ``enable_reduce_sample`` (``--additional-config``, 0.20.2rc1 on): the
  sampler gathers each TP rank's top-k candidates and samples
  ``[rows, tp·k]`` probabilities, never ``[rows, vocab]``; every launched
  ``q`` would fall back ``vocab_mismatch``;
* Atlas 300I (310P, 0.18.0 on): ``NPUModelRunner310`` builds
  ``AscendSampler310``, whose ``AscendTopKTopPSampler310.forward_native``
  samples with ``_random_sample_310p`` (noise drawn on the host, later by
  inverse CDF) and never calls ``random_sample`` — unless
  ``VLLM_BATCH_INVARIANT`` sends it to the base class's path.

How: as :mod:`overlay.patches.model_runner`, through the shared wrappers.

Remove when: vllm-ascend ships an async exponential with stream-event
instrumentation of its own, or only its Model Runner V2 remains.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from overlay import guard
from overlay.patches._runner import no_seam_message, patch_runner_class
from overlay.patches._util import Patcher, observe_init
from overlay.arms import inline_random_sample
from overlay.patches.topk_topp import make_random_sample
from overlay.sampler import sample_with_noise

RUNNER_MODULE = "vllm_ascend.worker.model_runner_v1"
SAMPLER_MODULE = "vllm_ascend.sample.sampler"
#: Atlas 300I (310P) runner, vllm-ascend >= 0.14: overrides ``_model_forward``
#: (it must be wrapped itself, whether or not it calls ``super()``).
RUNNER_310P_MODULE = "vllm_ascend._310p.model_runner_310p"
TARGETS = (RUNNER_MODULE, SAMPLER_MODULE, RUNNER_310P_MODULE)
ASCEND_FLAG = "--additional-config '{\"enable_async_exponential\": false}'"
REDUCE_SAMPLE_FLAG = "--additional-config '{\"enable_reduce_sample\": false}'"
#: The 310P top-k/top-p sampler (vllm_ascend/_310p/sample/sampler.py, 0.18.0 on): no random_sample.
SAMPLER_310P_CLASS = "AscendTopKTopPSampler310"

_patcher = Patcher()
_done: set[str] = set()


def check_runner(runner: Any) -> None:
    """Step aside (once) when vllm-ascend's own async exponential or reduce-sample is on."""
    config = getattr(runner, "ascend_config", None)
    if config is not None and getattr(config, "enable_async_exponential", False):
        guard.not_applicable(
            "vllm-ascend's own async exponential is enabled and bypasses "
            f"random_sample; run with {ASCEND_FLAG} to measure with the overlay",
            "npu",
        )
    elif config is not None and getattr(config, "enable_reduce_sample", False):
        guard.not_applicable(
            "vllm-ascend's enable_reduce_sample samples [rows, tp*k] gathered top-k candidates, "
            f"never the [rows, vocab] q the overlay draws; run with {REDUCE_SAMPLE_FLAG} to measure with the overlay",
            "npu",
        )


def _batch_invariant() -> bool:
    try:
        import vllm.envs as envs

        return bool(getattr(envs, "VLLM_BATCH_INVARIANT", False))
    except Exception:  # noqa: BLE001 - an older vLLM: not set
        return False


def check_310p(runner: Any) -> None:
    """Step aside (once) when the 310P runner built its own sampler, which never calls random_sample."""
    sampler = getattr(getattr(runner, "sampler", None), "topk_topp_sampler", None)
    if type(sampler).__name__ == SAMPLER_310P_CLASS and not _batch_invariant():
        guard.not_applicable(
            "the Atlas 300I (310P) sampler AscendSampler310 draws its noise in _random_sample_310p "
            "and never calls random_sample, so there is no q to move off the critical path "
            "(only VLLM_BATCH_INVARIANT=1 sends it through random_sample)",
            "npu",
        )


def _apply_runner(module: ModuleType) -> None:
    cls = module.NPUModelRunner
    if patch_runner_class(_patcher, cls) is None:
        _patcher.undo()
        guard.not_applicable(no_seam_message(cls, "use vllm-ascend >= 0.13.0rc1"), "npu")
        return
    observe_init(_patcher, cls, check_runner)


def _apply_310p(module: ModuleType) -> None:
    cls = module.NPUModelRunner310
    patch_runner_class(_patcher, cls)
    # Observed on the 310P class itself: its __init__ sets self.sampler after the base's.
    observe_init(_patcher, cls, check_310p)


def _apply_sampler(module: ModuleType) -> None:
    # Same replacement as vLLM's: vllm-ascend's random_sample takes
    # (probs, generators) on every release, which make_random_sample keeps.
    # Its own draw runs on a side stream, so a three-arm "off" block draws
    # inline on the compute stream instead (overlay.arms); "native" calls it as shipped.
    _patcher.set(module, "random_sample", make_random_sample(
        module.random_sample, sample_with_noise,
        draw_inline=functools.partial(inline_random_sample, finish=sample_with_noise)))


def apply(module: ModuleType) -> None:
    """Patch whichever of the two vllm-ascend modules ``module`` is."""
    name = module.__name__
    if name in _done:
        return
    if name == RUNNER_MODULE:
        _apply_runner(module)
    elif name == SAMPLER_MODULE:
        _apply_sampler(module)
    elif name == RUNNER_310P_MODULE:
        _apply_310p(module)
    else:
        raise ValueError(f"not a target of this patch: {name}")
    _done.add(name)


def remove() -> None:
    """Restore everything this module patched."""
    _patcher.undo()
    _done.clear()

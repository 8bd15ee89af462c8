"""Patch: vllm-ascend's NPU model runner (V1) and its sampler.

Targets (applied only where vllm-ascend is installed and imports them):
* ``vllm_ascend.worker.model_runner_v1.NPUModelRunner`` — ``execute_model``,
  ``_model_forward`` (NPU signature: ``num_tokens_padded`` first), the warm-up
  methods it overrides, and ``__init__``;
* ``vllm_ascend.sample.sampler.random_sample`` — what
  ``AscendTopKTopPSampler.forward_native`` calls by its global name
  (``(probs, generators)``, no fp64 gumbel).

Why: the NPU runner overrides the V1 methods the generic patch hooks, and the
Ascend sampler has its own ``random_sample`` (drawn on a global side stream,
then waited with ``wait_stream``). The overlay launches ``q`` before the
forward on its own side stream, waits with a device event, and keeps ``q``
alive with ``record_stream`` — the step vllm-ascend's own async exponential
lacked.

vllm-ascend's own ``enable_async_exponential`` (``--additional-config``)
replaces ``random_sample`` by its pre-drawn ``q`` with a host synchronise; with
it on the two would fight, so the overlay says so once and steps aside.

How: as :mod:`overlay.patches.model_runner`, through the shared wrappers.

Remove when: vllm-ascend ships an async exponential with stream-event
instrumentation of its own, or only its Model Runner V2 remains.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from overlay import guard
from overlay.patches._runner import patch_runner_class
from overlay.patches._util import Patcher, observe_init
from overlay.sampler import overlay_random_sample

RUNNER_MODULE = "vllm_ascend.worker.model_runner_v1"
SAMPLER_MODULE = "vllm_ascend.sample.sampler"
TARGETS = (RUNNER_MODULE, SAMPLER_MODULE)
ASCEND_FLAG = "--additional-config '{\"enable_async_exponential\": false}'"

_patcher = Patcher()
_done: set[str] = set()


def check_runner(runner: Any) -> None:
    """Step aside (once) when vllm-ascend's own async exponential is on."""
    config = getattr(runner, "ascend_config", None)
    if config is not None and getattr(config, "enable_async_exponential", False):
        guard.not_applicable(
            "vllm-ascend's own async exponential is enabled and bypasses "
            f"random_sample; run with {ASCEND_FLAG} to measure with the overlay",
            "npu",
        )


def _apply_runner(module: ModuleType) -> None:
    cls = module.NPUModelRunner
    patch_runner_class(_patcher, cls)
    observe_init(_patcher, cls, check_runner)


def _apply_sampler(module: ModuleType) -> None:
    original = module.random_sample

    @functools.wraps(original)
    def random_sample(probs: Any, generators: dict, *args: Any, **kwargs: Any) -> Any:
        return overlay_random_sample(
            probs,
            generators,
            False,
            inline=lambda p, g, _fp64: original(p, g, *args, **kwargs),
        )

    _patcher.set(module, "random_sample", random_sample)


def apply(module: ModuleType) -> None:
    """Patch whichever of the two vllm-ascend modules ``module`` is."""
    name = module.__name__
    if name in _done:
        return
    if name == RUNNER_MODULE:
        _apply_runner(module)
    elif name == SAMPLER_MODULE:
        _apply_sampler(module)
    else:
        raise ValueError(f"not a target of this patch: {name}")
    _done.add(name)


def remove() -> None:
    """Restore everything this module patched."""
    _patcher.undo()
    _done.clear()

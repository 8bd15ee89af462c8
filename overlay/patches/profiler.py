"""Patch: let vLLM's torch profiler see the CPU lane's worker thread.

Target: ``vllm.profiler.wrapper.TorchProfilerWrapper._start``.

Why: Kineto records CPU ops only on the threads where profiling was enabled,
unless ``_ExperimentalConfig(profile_all_threads=True)``. vLLM does not set
it, so the CPU lane's ``expo_prof::exponential`` / ``aten::exponential_``
would be missing from ``/start_profile`` traces. The event log has the
windows either way; this makes the trace show them too.

How: before the original ``_start`` builds the profiler, add that experimental
config to the wrapper's profiler kwargs — only when the overlay draws on a CPU
thread lane (or no accelerator is present) and only if vLLM set no
experimental config of its own.

Remove when: vLLM profiles all threads, or exposes the experimental config.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from overlay import guard
from overlay.patches._util import Patcher
from overlay.sampler import active

TARGETS = ("vllm.profiler.wrapper",)

_patcher = Patcher()


def _wants_all_threads() -> bool:
    ov = active()
    if ov is None:
        return False
    if ov.lane is not None:
        return ov.lane.kind == "thread"
    import torch

    return not torch.accelerator.is_available()


def add_all_threads(kwargs: dict) -> None:
    """Set ``experimental_config`` to profile all threads, unless already set."""
    if "experimental_config" in kwargs:
        return
    import torch

    try:
        config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    except (AttributeError, TypeError):  # an older torch without the option
        return
    kwargs["experimental_config"] = config


def apply(module: ModuleType) -> None:
    """Wrap ``TorchProfilerWrapper._start`` in ``module``."""
    if _patcher.applied:
        return
    cls = module.TorchProfilerWrapper
    original = cls._start

    @functools.wraps(original)
    def _start(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            profiler_kwargs = getattr(self, "_profiler_kwargs", None)
            if isinstance(profiler_kwargs, dict) and _wants_all_threads():
                add_all_threads(profiler_kwargs)
        except Exception as exc:  # noqa: BLE001
            guard.failed(exc)
        return original(self, *args, **kwargs)

    _patcher.set(cls, "_start", _start)


def remove() -> None:
    """Restore ``_start``."""
    _patcher.undo()

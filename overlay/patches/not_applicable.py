"""Patch: notice Model Runner V2 and step aside.

Targets: ``vllm.v1.worker.gpu.model_runner.GPUModelRunner`` and
``vllm.v1.worker.cpu.model_runner.CPUModelRunner`` (Model Runner V2, the
default on GPU from vLLM 0.32; vllm-ascend's V2 ``NPUModelRunner`` subclasses
the GPU one) — ``__init__`` only, observed, never changed in effect.

Why: V2 samples with a fused Triton Gumbel kernel (``gumbel_sample``) that
draws its noise inside the kernel; there is no ``q`` to move off the critical
path. The user must learn this once — with the flag that brings back the V1
runner the overlay hooks — rather than find an empty event log.

How: the constructor runs unchanged, then the overlay writes one warning and a
``not_applicable`` notice and removes all its patches.

Remove when: the overlay grows a V2 variant (noise as a kernel input).
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from overlay import guard
from overlay.patches._util import Patcher
from overlay.sampler import active

TARGETS = ("vllm.v1.worker.gpu.model_runner", "vllm.v1.worker.cpu.model_runner")
CLASS_NAMES = {
    "vllm.v1.worker.gpu.model_runner": "GPUModelRunner",
    "vllm.v1.worker.cpu.model_runner": "CPUModelRunner",
}
V2_FLAG = "VLLM_USE_V2_MODEL_RUNNER=0"

_patcher = Patcher()
_done: set[str] = set()


def _backend(init: Any, runner: Any, args: tuple, kwargs: dict) -> str:
    """The device type the V2 runner was built for (``__init__(self, vllm_config, device)``).

    The ``device`` argument is bound by name to the real constructor's
    signature (positionally it comes after ``vllm_config``); else the
    runner's own ``device``; "cuda" when neither says.
    """
    import inspect

    device = None
    try:
        device = inspect.signature(init).bind(runner, *args, **kwargs).arguments.get("device")
    except (TypeError, ValueError):
        pass
    if device is None:
        device = getattr(runner, "device", None)
    return str(getattr(device, "type", device or "cuda")).split(":")[0]


def apply(module: ModuleType) -> None:
    """Observe the V2 runner class of ``module``."""
    name = module.__name__
    if name in _done:
        return
    cls = getattr(module, CLASS_NAMES[name])
    _done.add(name)
    if not _patcher.owns(cls, "__init__"):
        return  # inherited: the base class's observer covers it
    original_init = cls.__init__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        if active() is not None:
            guard.not_applicable(
                "Model Runner V2 samples with a fused Triton Gumbel kernel that "
                "draws its own noise; set "
                f"{V2_FLAG} to use the V1 runner the overlay hooks",
                _backend(original_init, self, args, kwargs),
            )

    _patcher.set(cls, "__init__", __init__)


def remove() -> None:
    """Restore the constructors."""
    _patcher.undo()
    _done.clear()

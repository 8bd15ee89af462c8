"""Patch: notice Model Runner V2 and step aside.

Targets: ``vllm.v1.worker.gpu.model_runner.GPUModelRunner`` and
``vllm.v1.worker.cpu.model_runner.CPUModelRunner`` (Model Runner V2, the
default on GPU from vLLM 0.32; vllm-ascend's V2 ``NPUModelRunner`` subclasses
the GPU one) — ``__init__`` only, observed, never changed in effect.

Why: V2 samples with a fused Triton Gumbel kernel (``gumbel_sample``) that
draws its noise inside the kernel; there is no ``q`` to move off the critical
path. The user must learn this once — with the flag that brings back the V1
runner the overlay hooks, on the releases where that flag exists and selects
V1 (0.32 - 0.33: ``vllm.envs`` defines it and ``gpu_model_runner`` exists);
from 0.34 V1 is gone and ``validate_environ`` rejects the flag, so the notice
says this release has only Model Runner V2, whose noise is a counter-based
Murmur3 hash computed in the kernel (``murmur3_uniform32(seed, pos, token)``,
``vllm/v1/worker/gpu/sample/gumbel.py``): nothing calls ``exponential_`` and
nothing accepts pre-drawn noise — rather than find an empty event log.

vllm-ascend's opt-in V2 (``VLLM_USE_V2_MODEL_RUNNER=1``; its V1 stays the
default through 0.30.0rc2) subclasses the same GPU V2 runner, so it is seen
here too, with the NPU backend; its notice names what that engine samples
with, read from the installed sources: from 0.28.0rc1 ``categorical_sample``
(``vllm_ascend/ops/triton/v2/sample/categorical_sample.py``, kernels
``_categorical_prepare_mass_kernel`` and ``_categorical_sample_kernel``: one
uniform per row, no noise over the vocabulary), on 0.27.1rc1 the Ascend Triton
port of ``_gumbel_sample_kernel`` (noise inside) — and that the default V1
runner is where the overlay runs.

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
from overlay.sourcecheck import site_of, v2_only_message

TARGETS = ("vllm.v1.worker.gpu.model_runner", "vllm.v1.worker.cpu.model_runner")
CLASS_NAMES = {
    "vllm.v1.worker.gpu.model_runner": "GPUModelRunner",
    "vllm.v1.worker.cpu.model_runner": "CPUModelRunner",
}
V2_FLAG = "VLLM_USE_V2_MODEL_RUNNER=0"
V1_RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"

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


def v1_selectable() -> bool:
    """Whether the installed vLLM has the V1 runner and ``VLLM_USE_V2_MODEL_RUNNER`` to select it.

    Both are read from the installed sources (``vllm.envs`` declares its
    variables in ``environment_variables``; the V1 runner module is looked up,
    not imported). False when either is missing or cannot be read.
    """
    import importlib.util

    try:
        import vllm.envs as envs

        declared = "VLLM_USE_V2_MODEL_RUNNER" in getattr(envs, "environment_variables", {})
        return declared and importlib.util.find_spec(V1_RUNNER_MODULE) is not None
    except Exception:  # noqa: BLE001 - an unreadable vLLM: give no advice
        return False


#: vllm-ascend's V2 sampler from 0.28.0rc1 (its presence in the installed sources says which V2 it is).
ASCEND_CATEGORICAL = "vllm_ascend/ops/triton/v2/sample/categorical_sample.py"


def ascend_v2_message() -> str:
    """The notice when vllm-ascend's opt-in Model Runner V2 is built: what it samples with, and where the overlay runs."""
    site = site_of("vllm_ascend")
    if site is not None and (site / ASCEND_CATEGORICAL).is_file():
        sampler = ("samples with categorical_sample (_categorical_prepare_mass_kernel, _categorical_sample_kernel): "
                   "one uniform per row and no noise over the vocabulary, so there is no q to draw early")
    else:
        sampler = ("samples with its Ascend Triton Gumbel kernel (_gumbel_sample_kernel), which draws its own noise "
                   "inside the kernel; there is no q to move off the critical path")
    return (f"vllm-ascend's Model Runner V2 (VLLM_USE_V2_MODEL_RUNNER=1) {sampler}; the default V1 runner "
            f"(leave VLLM_USE_V2_MODEL_RUNNER unset, or set {V2_FLAG}) is where the overlay runs")


def v2_message(backend: str = "cuda") -> str:
    """The notice when a V2 runner is built: vllm-ascend's own on the NPU; else with the flag that selects V1
    only where it exists."""
    if backend == "npu":
        return ascend_v2_message()
    if v1_selectable():
        return ("Model Runner V2 samples with a fused Triton Gumbel kernel that draws its own noise; "
                f"set {V2_FLAG} to use the V1 runner the overlay hooks")
    return v2_only_message()


def platform_backend() -> str:
    """The device type of vLLM's current platform ("cuda" when it cannot be read)."""
    try:
        from vllm.platforms import current_platform

        return str(getattr(current_platform, "device_type", "") or "cuda")
    except Exception:  # noqa: BLE001
        return "cuda"


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
            backend = _backend(original_init, self, args, kwargs)
            guard.not_applicable(v2_message(backend), backend)

    _patcher.set(cls, "__init__", __init__)


def remove() -> None:
    """Restore the constructors."""
    _patcher.undo()
    _done.clear()

"""Patch: vLLM V1 model runner — launch ``q`` right before each forward pass.

Target: ``vllm.v1.worker.gpu_model_runner.GPUModelRunner`` (Model Runner V1
of vLLM 0.10 - 0.33, each release checked in docs/overlay.md; ``CPUModelRunner`` inherits these methods, so the CPU build is
covered by the same patch): ``execute_model``, ``_model_forward`` (vLLM >=
0.11; on 0.10 ``_prepare_inputs`` instead, see :mod:`overlay.patches._runner`),
``_dummy_run``, ``_dummy_sampler_run``.

Why: ``q`` must be launched after the batch is prepared (its size is
``input_batch.num_reqs``) and before the forward pass, so that it is drawn
while the forward runs. ``_model_forward`` is vLLM's documented seam for
exactly "the model call inside execute_model".

How: see :mod:`overlay.patches._runner` — the originals are wrapped, called
once, and restored by :func:`remove`.

Remove when: vLLM draws the Gumbel noise off the critical path itself (Model
Runner V2 fuses it into a Triton kernel; once V1 is gone this patch is moot).
"""

from __future__ import annotations

from types import ModuleType

from overlay import guard
from overlay.patches._runner import no_seam_message, patch_runner_class
from overlay.patches._util import Patcher

TARGETS = ("vllm.v1.worker.gpu_model_runner",)

_patcher = Patcher()


def apply(module: ModuleType) -> None:
    """Wrap the V1 ``GPUModelRunner`` methods in ``module``."""
    if _patcher.applied:
        return
    cls = module.GPUModelRunner
    seam = patch_runner_class(_patcher, cls)
    if seam is None:
        # Say it at start, once, and leave vLLM untouched.
        _patcher.undo()
        guard.not_applicable(no_seam_message(cls, "use vLLM >= 0.10 (Model Runner V1)"), "cuda")


def remove() -> None:
    """Restore the original methods."""
    _patcher.undo()

"""The vLLM patches, one module per target, each with ``apply`` / ``remove``.

Importing this package (or a patch module) changes nothing: a patch acts only
when :mod:`overlay.plugin` calls ``apply(module)`` with the imported target
module. Each module's docstring names its target, why, how, and when it can be
removed. ``ALL`` is the order the plugin applies them in (and removes them in
reverse).
"""

from __future__ import annotations

from overlay.patches import ascend, model_runner, not_applicable, profiler, shutdown, topk_topp

ALL = (topk_topp, model_runner, ascend, not_applicable, profiler, shutdown)

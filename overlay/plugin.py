"""vLLM general-plugin entry point: ``expo_prof = "overlay.plugin:register"``.

vLLM calls :func:`register` in every process it starts (API server, engine
core, each worker) — possibly in a process forked from one that already did.
It is idempotent, does nothing unless ``EXPO_PROF_ASYNC_EXPONENTIAL`` (or its
alias) is on, and patches lazily: each patch is applied when vLLM itself
imports the target module, so processes that never run a model are left as
they are and open no event log.

Failure policy:
* a bad switch value is the user's to fix: the process stops at start-up with
  one line naming the variable, the value and the allowed words (no
  traceback) — serving without the overlay the user asked for would produce
  misleading measurements;
* any error inside the overlay itself: one warning, every patch removed,
  vLLM keeps serving on its own path;
* an installed vLLM that samples in a way the overlay cannot hook (Model
  Runner V2, FlashInfer, vllm-ascend's own async exponential): one warning
  naming the flag that makes it apply (where one exists), a ``not_applicable``
  notice in the event log, every patch removed;
* a vLLM / vllm-ascend version it cannot read or newer than the newest
  checked (:mod:`overlay.versions`): it checks the installed sources, and runs
  where they match a checked release; otherwise the same, naming the first
  function that fails and the release it was compared with.
"""

from __future__ import annotations

import functools
import logging
from types import ModuleType
from typing import Any

from overlay import guard, importhook
from overlay.contract import DEFAULT_SWITCHBACK_BLOCK, MODE_SWITCHBACK, NOTICE_DISABLED, NOTICE_NOT_APPLICABLE, TWO_ARMS
from overlay.switch import SwitchError, instrument_enabled, overlay_mode, switchback_arms, switchback_block
from overlay.switch import lane_cpus as read_lane_cpus

logger = logging.getLogger("vllm.expo_prof")

_registered = False
_applied: list[ModuleType] = []
_stopped = False


def register() -> None:
    """The vLLM plugin hook (idempotent; no-op unless the switch is on)."""
    global _registered
    if _registered:
        return
    _registered = True
    try:
        mode = overlay_mode()
        instrument = instrument_enabled()
        cpus = read_lane_cpus()
        block = switchback_block()
        arms = switchback_arms()
    except SwitchError as exc:
        # SystemExit with a message: Python prints exactly that line and exits
        # with status 1, which vLLM does not catch during start-up.
        raise SystemExit(f"expo-prof: {exc}") from None
    if mode is None:
        return
    try:
        enable(instrument=instrument, lane_cpus=cpus, mode=mode, block_steps=block, arms=arms)
        step_aside_if_unknown()
    except Exception as exc:  # noqa: BLE001
        disable(exc)


def step_aside_if_unknown() -> None:
    """On a vLLM / vllm-ascend release the matrix has not seen: run when its sources pass the check, saying once
    which checked release they matched; else step aside (one notice naming the function that fails)."""
    from overlay.versions import check_installed

    verdict = check_installed()
    if verdict.reason is not None:
        from overlay.patches.not_applicable import platform_backend

        not_applicable(verdict.reason, platform_backend())
    elif verdict.note is not None:
        logger.info("expo-prof: %s", verdict.note)


def enable(
    *, instrument: bool = True, log: Any = None, patches: Any = None, lane_cpus: Any = "auto",
    mode: str = "on", block_steps: int = DEFAULT_SWITCHBACK_BLOCK, arms: tuple[str, ...] = TWO_ARMS,
) -> Any:
    """Create this process's overlay and arm the patches; returns the overlay.

    ``log`` defaults to an event log in ``$EXPO_PROF_OUT``; ``patches`` to
    :data:`overlay.patches.ALL` (tests pass their own selection);
    ``lane_cpus`` places the CPU lane's thread (``EXPO_PROF_LANE_CPUS``);
    ``mode`` "on" or "switchback" (blocks of ``block_steps`` steps alternate
    with vLLM's own path; ``arms``: the phases they cycle through, overlay.switch.switchback_arms).
    """
    global _stopped
    from overlay import patches as patch_pkg
    from overlay.events import EventLog
    from overlay.sampler import Overlay, default_lane, set_active

    _stopped = False
    overlay = Overlay(
        log or EventLog.from_env(instrument=instrument),
        instrument=instrument,
        lane_factory=functools.partial(default_lane, cpus=lane_cpus),
        mode=mode,
        block_steps=block_steps,
        arms=arms,
    )
    set_active(overlay)
    guard.set_handlers(disable, not_applicable)
    if mode == MODE_SWITCHBACK:
        logger.info("expo-prof overlay in switchback: blocks of %d steps cycle through the arms %s, with %s "
                    "instrumentation", block_steps, ",".join(arms),
                    "per-step" if instrument else "no")
    else:
        logger.info("expo-prof overlay on: async exponential with %s instrumentation",
                    "per-step" if instrument else "no")
    for patch in patch_pkg.ALL if patches is None else patches:
        for target in patch.TARGETS:
            importhook.when_imported(target, _applier(patch))
    return overlay


def _applier(patch: ModuleType) -> Any:
    def apply(module: ModuleType) -> None:
        if _stopped:
            return
        try:
            patch.apply(module)
        except Exception as exc:  # noqa: BLE001 - never break vLLM's import
            disable(exc)
            return
        if patch not in _applied:
            _applied.append(patch)

    return apply


def _stop() -> Any:
    """Remove every patch and deactivate; returns the overlay that was active."""
    global _stopped
    from overlay.sampler import active, set_active

    _stopped = True
    importhook.clear()
    while _applied:
        patch = _applied.pop()
        try:
            patch.remove()
        except Exception:  # noqa: BLE001 - keep restoring the others
            logger.debug("expo-prof: removing %s failed", patch.__name__, exc_info=True)
    overlay = active()
    set_active(None)
    guard.set_handlers(None, None)
    return overlay


def disable(exc: BaseException) -> None:
    """Switch the overlay off after an internal error: one warning, all undone."""
    if _stopped:
        return
    overlay = _stop()
    message = (
        f"expo-prof overlay disabled after an internal error "
        f"({type(exc).__name__}: {exc}); vLLM continues without it"
    )
    logger.warning(message)
    _notice(overlay, "error", NOTICE_DISABLED, message, None)


def not_applicable(message: str, backend: str) -> None:
    """Step aside because the installed vLLM samples in a way not hooked."""
    if _stopped:
        return
    overlay = _stop()
    logger.warning("expo-prof overlay does not apply: %s", message)
    _notice(overlay, "warning", NOTICE_NOT_APPLICABLE, message, backend)


def _notice(overlay: Any, level: str, code: str, message: str, backend: str | None) -> None:
    if overlay is None:
        return
    try:
        if overlay.backend is None and backend is not None:
            overlay.log.configure(backend=backend, lane="thread" if backend == "cpu" else "stream")
        if overlay.log.configured:
            overlay.log.notice(level, code, message)
    except Exception:  # noqa: BLE001 - the notice is best effort
        logger.debug("expo-prof: notice not written", exc_info=True)


def unregister() -> None:
    """Undo :func:`register` completely (for tests and embedders).

    Restores every patched attribute to the very object it held, forgets
    pending import hooks, and lets :func:`register` run again.
    """
    global _registered
    overlay = _stop()
    if overlay is not None:
        overlay.shutdown()
    _registered = False

"""Where an exception inside the overlay goes: one handler, set by the plugin.

Patched vLLM code calls :func:`failed` when the overlay's own code raises; the
plugin's handler switches the overlay off (one warning, patches removed) and
the caller continues on vLLM's original path. Kept apart from
:mod:`overlay.plugin` so the patches need not import it, and below
:mod:`overlay.sampler`: the sampler installs where notices go
(:func:`set_notice_sink`), this module imports neither (no import cycle).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger("vllm.expo_prof")

_on_error: Callable[[BaseException], None] | None = None
_on_not_applicable: Callable[[str, str], None] | None = None
#: The active overlay's ``notice_later(level, code, message)``, set by :func:`overlay.sampler.set_active`.
_notice: Callable[[str, str, str], None] | None = None


def set_handlers(
    on_error: Callable[[BaseException], None] | None,
    on_not_applicable: Callable[[str, str], None] | None,
) -> None:
    """Install the plugin's handlers (None restores the defaults)."""
    global _on_error, _on_not_applicable
    _on_error, _on_not_applicable = on_error, on_not_applicable


def set_notice_sink(notice: Callable[[str, str, str], None] | None) -> None:
    """Where notices for the event log go: the active overlay's ``notice_later`` (None: nowhere)."""
    global _notice
    _notice = notice


def failed(exc: BaseException) -> None:
    """Report an internal overlay error; never raises."""
    try:
        if _on_error is not None:
            _on_error(exc)
        else:
            # No plugin handler: the overlay is already off (it warned then).
            logger.debug("expo-prof overlay error while off: %r", exc)
    except Exception:  # noqa: BLE001 - the guard itself must not break vLLM
        pass


def not_applicable(message: str, backend: str) -> None:
    """Report that the installed vLLM samples in a way the overlay cannot hook."""
    try:
        if _on_not_applicable is not None:
            _on_not_applicable(message, backend)
        else:
            logger.debug("expo-prof overlay does not apply (already off): %s", message)
    except Exception:  # noqa: BLE001
        pass


def partly_applicable(message: str) -> None:
    """Say once (log and event log) that some batches bypass the overlay; it stays on."""
    try:
        from overlay.contract import NOTICE_PARTLY_APPLICABLE

        logger.warning("expo-prof overlay applies in part: %s", message)
        if _notice is not None:
            _notice("warning", NOTICE_PARTLY_APPLICABLE, message)
    except Exception:  # noqa: BLE001
        pass

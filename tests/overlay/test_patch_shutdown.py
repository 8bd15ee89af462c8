"""overlay/patches/shutdown.py on the installed (real) vLLM: a grace window only where vLLM would SIGKILL the
engine right after SIGTERM (issue 33, item 7)."""

from __future__ import annotations

from overlay import plugin
from overlay.events import EventLog
from overlay.patches import shutdown


def test_zero_timeouts_get_a_grace_window_and_everything_else_is_vllms_answer(vllm_available, monkeypatch):
    """GIVEN vLLM's real vllm.v1.engine.utils WHEN the plugin enables the overlay with the shutdown patch THEN a
    stop with --shutdown-timeout 0 and no budget of its own gives the engine process GRACE_S seconds before the
    SIGKILL; a positive request timeout with no budget left keeps its zero (vLLM enforces the drain deadline with
    it), given budgets and None stay as they were; WHEN the overlay is switched off THEN vLLM's own function is
    back, the very same object."""
    import vllm.v1.engine.utils as target

    original = target.get_engine_process_shutdown_timeout
    assert original(0, 0) == 0  # what makes vLLM kill the engine at once (not ROCm)
    plugin.enable(log=EventLog(None), patches=(shutdown,))
    patched = target.get_engine_process_shutdown_timeout
    assert patched is not original
    assert patched(0, 0) == shutdown.GRACE_S > 0
    assert patched(10, 0) == 0 and patched(0, 3.0) == 3.0 and patched(0, None) is None
    assert patched(10, 7.5) == 7.5
    # AND a window the user set explicitly (vLLM 0.34 reads it there), even 0, is theirs: vLLM's answer stands
    monkeypatch.setenv(shutdown.USER_WINDOW_ENV, "0")
    assert patched(0, 0) == original(0, 0) == 0
    monkeypatch.delenv(shutdown.USER_WINDOW_ENV)
    plugin.unregister()
    assert target.get_engine_process_shutdown_timeout is original

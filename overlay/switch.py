"""Parse the overlay's on/off switches from the environment.

Stdlib only. ``EXPO_PROF_ASYNC_EXPONENTIAL`` turns the overlay on; its alias
``VLLM_ASCEND_ENABLE_ASYNC_EXPONENTIAL`` (vllm-ascend's name for the same
feature) is honoured too. A value outside the allowed words raises
:class:`SwitchError` with a one-line message naming the variable, the value and
the allowed words — never a traceback from ``int()``, which is how the
original feature crashed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from overlay.contract import (
    DEFAULT_SWITCHBACK_BLOCK,
    ENV_INSTRUMENT,
    ENV_LANE_CPUS,
    ENV_SWITCH,
    ENV_SWITCH_ALIAS,
    ENV_SWITCHBACK_ARMS,
    ENV_SWITCHBACK_BLOCK,
    FALSE_WORDS,
    MODE_SWITCHBACK,
    THREE_ARMS,
    TRUE_WORDS,
    TWO_ARMS,
)


class SwitchError(ValueError):
    """An overlay environment variable holds a value that is not allowed."""


def _allowed() -> str:
    on = "/".join(TRUE_WORDS)
    off = "/".join(w for w in FALSE_WORDS if w)
    return f"{on} to enable, {off} (or empty) to disable"


def parse_bool(name: str, raw: str) -> bool:
    """Parse one switch value: case-insensitive, surrounding whitespace ignored.

    Raises :class:`SwitchError` naming ``name`` and ``raw`` for any other word.
    """
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise SwitchError(f"{name}={raw!r} is not allowed; use {_allowed()}")


def _parse_mode(raw: str) -> str | None:
    """The main switch's value: "on", "switchback" or None (off); SwitchError otherwise."""
    if raw.strip().lower() == MODE_SWITCHBACK:
        return MODE_SWITCHBACK
    try:
        return "on" if parse_bool(ENV_SWITCH, raw) else None
    except SwitchError:
        raise SwitchError(f"{ENV_SWITCH}={raw!r} is not allowed; use {_allowed()}, "
                          f"or {MODE_SWITCHBACK} to alternate blocks of steps between the two") from None


def overlay_mode(environ: Mapping[str, str] | None = None) -> str | None:
    """How the overlay runs: ``"on"``, ``"switchback"`` or None (off, the default).

    ``switchback`` alternates blocks of steps between the overlay and vLLM's
    own sampling path in one run, so one server run measures what the overlay
    saves. The alias takes only on/off words; when both variables are set they
    must agree on whether the overlay runs (switchback counts as on),
    otherwise :class:`SwitchError` names both.
    """
    env = os.environ if environ is None else environ
    mode = _parse_mode(env[ENV_SWITCH]) if ENV_SWITCH in env else None
    if ENV_SWITCH_ALIAS in env:
        alias = parse_bool(ENV_SWITCH_ALIAS, env[ENV_SWITCH_ALIAS])
        if ENV_SWITCH in env and alias != (mode is not None):
            raise SwitchError(
                f"{ENV_SWITCH}={env[ENV_SWITCH]!r} and {ENV_SWITCH_ALIAS}="
                f"{env[ENV_SWITCH_ALIAS]!r} disagree; set one of them, or both to "
                "the same value"
            )
        if ENV_SWITCH not in env and alias:
            mode = "on"
    return mode


def overlay_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the async exponential overlay runs at all (on or switchback; default off)."""
    return overlay_mode(environ) is not None


def switchback_block(environ: Mapping[str, str] | None = None) -> int:
    """Steps per switchback block (``EXPO_PROF_SWITCHBACK_BLOCK``, default 8, at least 2).

    At least 2: the analysis drops the first step of every block (washout).
    """
    env = os.environ if environ is None else environ
    raw = env.get(ENV_SWITCHBACK_BLOCK, "")
    if not raw.strip():
        return DEFAULT_SWITCHBACK_BLOCK
    word = raw.strip()
    if not word.isdigit() or int(word) < 2:
        raise SwitchError(f"{ENV_SWITCHBACK_BLOCK}={raw!r} is not allowed; use a whole number of steps, at least 2 "
                          "(the first step of each block is dropped as washout)")
    return int(word)


def switchback_arms(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The switchback arms (``EXPO_PROF_SWITCHBACK_ARMS``): ``off,on`` (default) or ``off,on,native``.

    Two arms: ``off`` is the engine's sampling as shipped. Three arms: ``off``
    is the exponential drawn inline after the forward (the seed's switch off),
    ``native`` the engine as shipped (vllm-ascend's own side-stream draw).
    Order and case do not matter; anything else raises :class:`SwitchError`.
    """
    env = os.environ if environ is None else environ
    raw = env.get(ENV_SWITCHBACK_ARMS, "")
    if not raw.strip():
        return TWO_ARMS
    words = sorted(w.strip().lower() for w in raw.split(","))
    for arms in (TWO_ARMS, THREE_ARMS):
        if words == sorted(arms):
            return arms
    raise SwitchError(f"{ENV_SWITCHBACK_ARMS}={raw!r} is not allowed; use {','.join(TWO_ARMS)} or "
                      f"{','.join(THREE_ARMS)}")


def instrument_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether per-step timing is recorded (``EXPO_PROF_INSTRUMENT``, default on)."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_INSTRUMENT)
    if raw is None or not raw.strip():
        return True
    return parse_bool(ENV_INSTRUMENT, raw)


def parse_cpu_list(text: str) -> set[int]:
    """``"1"``, ``"2-3,6"`` -> a set of CPU ids; ValueError when malformed."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not lo.strip().isdigit() or (sep and not hi.strip().isdigit()):
            raise ValueError(part)
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(part)
        cpus.update(range(first, last + 1))
    return cpus


def lane_cpus(environ: Mapping[str, str] | None = None) -> str | set[int]:
    """Placement of the CPU lane (``EXPO_PROF_LANE_CPUS``): "auto", "inherit" or CPU ids."""
    env = os.environ if environ is None else environ
    raw = env.get(ENV_LANE_CPUS, "")
    word = raw.strip().lower()
    if word in ("", "auto"):
        return "auto"
    if word in ("inherit", "none"):
        return "inherit"
    try:
        return parse_cpu_list(word)
    except ValueError:
        raise SwitchError(
            f"{ENV_LANE_CPUS}={raw!r} is not allowed; use auto, inherit, or CPU ids like 1 or 2-3,6"
        ) from None

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
    ENV_INSTRUMENT,
    ENV_LANE_CPUS,
    ENV_SWITCH,
    ENV_SWITCH_ALIAS,
    FALSE_WORDS,
    TRUE_WORDS,
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


def overlay_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the async exponential overlay is switched on (default off).

    Both the main variable and its alias are read; when both are set they must
    agree, otherwise :class:`SwitchError` names both.
    """
    env = os.environ if environ is None else environ
    values = {
        name: parse_bool(name, env[name])
        for name in (ENV_SWITCH, ENV_SWITCH_ALIAS)
        if name in env
    }
    if len(values) == 2 and values[ENV_SWITCH] != values[ENV_SWITCH_ALIAS]:
        raise SwitchError(
            f"{ENV_SWITCH}={env[ENV_SWITCH]!r} and {ENV_SWITCH_ALIAS}="
            f"{env[ENV_SWITCH_ALIAS]!r} disagree; set one of them, or both to "
            "the same value"
        )
    return any(values.values())


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

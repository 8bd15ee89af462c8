"""The reporter protocol and shared formatting helpers."""

from __future__ import annotations

from typing import IO, Protocol

from expo_prof.analysis.model import AnalysisResult


class Reporter(Protocol):
    """Renders an analysis result to a text stream."""

    def render(self, result: AnalysisResult, file: IO[str] | None = None) -> None:
        """Write ``result`` to ``file`` (the reporter's default stream when None)."""
        ...


def fmt_ns(ns: int | float) -> str:
    """Compact human duration: ``812ns``, ``12.3µs``, ``4.56ms``, ``1.234s``."""
    a = abs(ns)
    if a < 1_000:
        return f"{ns:.0f}ns"
    if a < 1_000_000:
        return f"{ns / 1e3:.1f}µs"
    if a < 1_000_000_000:
        return f"{ns / 1e6:.2f}ms"
    return f"{ns / 1e9:.3f}s"


def fmt_frac(x: float | None) -> str:
    """A fraction as a percentage; ``-`` when undefined."""
    return "-" if x is None else f"{100 * x:.1f}%"

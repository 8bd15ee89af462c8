"""The reporter protocol, and the fraction formatter of the tables (durations: :func:`expo_prof.words.fmt_ns`)."""

from __future__ import annotations

from typing import IO, Protocol

from expo_prof.analysis.model import AnalysisResult


class Reporter(Protocol):
    """Renders an analysis result to a text stream."""

    def render(self, result: AnalysisResult, file: IO[str] | None = None) -> None:
        """Write ``result`` to ``file`` (the reporter's default stream when None)."""
        ...


def fmt_frac(x: float | None) -> str:
    """A fraction as a percentage; ``-`` when undefined."""
    return "-" if x is None else f"{100 * x:.1f}%"

"""The one rich console of the CLI (stdout) and one for diagnostics (stderr)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from expo_prof.words import visible

console = Console(highlight=False, soft_wrap=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def safe(text: object) -> str:
    """Data for a console line (a name, a path, a message holding them): control and bidirectional-formatting
    characters shown as ``\\uXXXX`` and long text cut (:func:`expo_prof.words.visible`: an ESC sequence in a
    trace name cannot recolour the terminal, nor an RTL override reorder the line), then rich markup escaped."""
    return escape(visible(text))


def warn(message: str) -> None:
    """Print one warning line on stderr (``message`` may hold rich markup; escape trace names)."""
    err_console.print(f"[yellow]warning:[/] {message}")


def info(message: str) -> None:
    """Print one line on stderr about what was read or chosen (not a problem; ``message`` may hold markup)."""
    err_console.print(f"[dim]info:[/] {message}")

"""The one rich console of the CLI (stdout) and one for diagnostics (stderr)."""

from __future__ import annotations

from rich.console import Console

console = Console(highlight=False, soft_wrap=False)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def warn(message: str) -> None:
    """Print one warning line on stderr (``message`` may hold rich markup; escape trace names)."""
    err_console.print(f"[yellow]warning:[/] {message}")


def info(message: str) -> None:
    """Print one line on stderr about what was read or chosen (not a problem; ``message`` may hold markup)."""
    err_console.print(f"[dim]info:[/] {message}")

"""Options and output shared by the commands that analyse (analyze, timeline, report, export)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

#: --op / --source / --max-bytes: what every analysing command takes, validated once by Options.make.
_TARGET_OPTIONS = (
    click.option("--op", metavar="REGEX",
                 help="Analyse events whose name matches REGEX (e.g. nccl) instead of the exponential draw."),
    click.option("--source", type=click.Choice(["auto", "trace", "overlay-log"]), default="auto", show_default=True,
                 help="Where a rank has both a trace and an overlay event log, which one counts."),
    click.option("--max-bytes", metavar="SIZE", help="Cap on the decompressed size of one input file (e.g. 800M, 4G)."),
)


def target_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--op``, ``--source`` and ``--max-bytes`` to a command."""
    for opt in reversed(_TARGET_OPTIONS):
        f = opt(f)
    return f


def options(op: str | None, source: str, max_bytes: str | None):
    """The pipeline's Options from the command line (BadInput on a bad regex / size)."""
    from expo_prof.pipeline import Options

    return Options.make(op=op, source=source, max_bytes=max_bytes)


def show_notes(settings: Any, warnings: list[str], info: list[str]) -> None:
    """Warnings (always, unless --quiet) and the info lines on stderr; names from traces escaped."""
    if getattr(settings, "quiet", False):
        return
    from rich.markup import escape

    from expo_prof.console import info as info_line
    from expo_prof.console import warn

    for w in warnings:
        warn(escape(w))
    for line in info:
        info_line(escape(line))

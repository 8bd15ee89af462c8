"""What every command shares: its help layout, the exit-code table, ``-q``, and refusing conflicting options.

Each command module builds its click command with :func:`command`, which
gives it a one-line summary that survives click's shortening in the command
list, an examples block and the same exit-code table in every ``--help``
(docs/cli.md), and ``-q/--quiet`` at the command's level as well as the root's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import click

from expo_prof.errors import BadInput

#: The exit codes of every command (expo_prof/errors.py), as each --help prints them.
EXIT_CODES = """\b
Exit codes (every command):
  0    done
  1    nothing found: the inputs were read but hold no target instance
       (verify: a difference between overlay off and on was found)
  2    bad input or options (one line says which)
  3    a launched command or server failed (record, ab, demo, verify)
  130  interrupted (Ctrl-C); what was captured so far is kept"""


#: A hyphen that textwrap does not break at: help text is wrapped with every "-" swapped for it, then swapped back.
_NO_BREAK_HYPHEN = "\u2011"


class HelpFormatter(click.HelpFormatter):
    """click's help layout, except that a line never breaks at a hyphen: `expo-prof compare`, `--save-result`
    and "sampler-wait" stay whole (issue 34 item 7: a command never breaks), the word moves to the next line."""

    def write_text(self, text: str) -> None:
        super().write_text(text.replace("-", _NO_BREAK_HYPHEN))

    def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
        super().write_dl([(t, d.replace("-", _NO_BREAK_HYPHEN)) for t, d in rows], col_max, col_spacing)

    def getvalue(self) -> str:
        return super().getvalue().replace(_NO_BREAK_HYPHEN, "-")


class HelpContext(click.Context):
    """A context whose help is laid out by :class:`HelpFormatter`."""

    formatter_class = HelpFormatter


class Command(click.Command):
    """Every subcommand: its help laid out by :class:`HelpFormatter`."""

    context_class = HelpContext


class Group(click.Group):
    """The root: its help laid out by :class:`HelpFormatter`."""

    context_class = HelpContext


def command(name: str, *, summary: str, examples: Iterable[str] = (), **kw: Any) -> Callable:
    """A click command with ``summary`` as its short help, ``examples`` and the exit codes as its epilog,
    and ``-q/--quiet`` (which sets the root's ``settings.quiet``)."""
    lines = [ln for e in examples for ln in example_lines(e)]
    epilog = ("\b\nExamples:\n" + "\n".join(lines) + "\n\n" if lines else "") + EXIT_CODES

    def deco(f: Callable) -> click.Command:
        f = click.option("-v", "--verbose", "cmd_verbose", is_flag=True,
                         help="Name every file skipped (by default counted by kind).")(f)
        f = click.option("-q", "--quiet", "cmd_quiet", is_flag=True, help="Print only results and errors.")(f)
        f = _absorb_quiet(f)
        return click.command(name, cls=Command, short_help=summary, epilog=epilog, **kw)(f)

    return deco


#: Help is laid out for 80 columns (docs/cli.md): the examples block is printed as written (``\b``), so it is
#: fitted here; click wraps the rest to the terminal, at most 80 (the root's ``max_content_width``).
HELP_WIDTH = 80


def example_lines(example: str, width: int = HELP_WIDTH - 2) -> list[str]:  # click indents an epilog by 2
    """One example as help lines of at most ``width`` columns: ``cmd  # why`` that does not fit puts the comment
    on its own line above the command; a command still too long continues on indented lines (`` \\``)."""
    cmd, sep, why = example.partition("  #")
    cmd = cmd.rstrip() if sep else example
    if len("  " + example) <= width:
        return ["  " + example]
    out = [f"  # {why.strip()}"] if sep else []
    line = "  "
    for word in cmd.split(" "):
        if len(line) > 2 and len(line) + 1 + len(word) + 2 > width:  # room for " \\"
            out.append(line + " \\")
            line = "      "
        line += ("" if line.strip() == "" else " ") + word
    out.append(line)
    return out


def _absorb_quiet(f: Callable) -> Callable:
    """Fold the command-level ``-q`` and ``-v`` into the shared settings object, so commands read one flag each."""
    import functools

    @functools.wraps(f)
    def wrapper(*args: Any, cmd_quiet: bool = False, cmd_verbose: bool = False, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        if ctx.obj is not None:
            ctx.obj.quiet = ctx.obj.quiet or cmd_quiet
            ctx.obj.verbose = getattr(ctx.obj, "verbose", False) or cmd_verbose
        return f(*args, **kwargs)

    return wrapper


def given(ctx: click.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not its default)."""
    src = ctx.get_parameter_source(name)
    return src is not None and src.name == "COMMANDLINE"


def refuse_together(ctx: click.Context, first: str, others: Iterable[str], why: str = "") -> None:
    """BadInput (exit 2, one line) when option ``first`` is given together with any of ``others``."""
    clash = [o for o in others if given(ctx, o)]
    if given(ctx, first) and clash:
        flag = lambda n: "--" + n.replace("_", "-")  # noqa: E731
        raise BadInput(f"{flag(first)} cannot be combined with {', '.join(flag(c) for c in clash)}"
                       + (f": {why}" if why else ""))

"""What every command shares: its help layout, the exit-code table, the global options, and refusing conflicting options.

Each command module builds its click command with :func:`command`, which
gives it a one-line summary that survives click's shortening in the command
list, an examples block and the same exit-code table in every ``--help``
(docs/cli.md). Every :class:`Command` and the root :class:`Group` take the
global options (:data:`GLOBAL_OPTIONS`: ``-q``, ``-v``, ``--no-progress``,
``--version``) from one definition, so each works before the command's name
(``expo-prof --no-progress analyze X``) and after it (``expo-prof analyze X
--no-progress``) alike: both set the one :class:`Settings` the commands read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import click

from expo_prof.errors import BadInput
from expo_prof.version import __version__

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


@dataclass
class Settings:
    """The global options (:data:`GLOBAL_OPTIONS`), handed to every command as ``ctx.obj``: one object for the
    root and the command, whichever of the two was given each flag."""

    quiet: bool = False
    no_progress: bool = False
    #: -v: every file skipped named on its own line (by default they are counted by kind).
    verbose: bool = False


class GlobalOption(click.Option):
    """An option of :data:`GLOBAL_OPTIONS`: the root's and every command's, listed under "Global options"."""


def _set_flag(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """A global flag, wherever it was given, turns on its :class:`Settings` field (the root's object, which the
    command's context shares; a command run on its own gets one of its own). Never turns one off: given before
    and after the command's name, the two agree."""
    settings = ctx.ensure_object(Settings)
    if value and param.name:
        setattr(settings, param.name, True)


def _flag(*decls: str, help: str) -> Callable[[Callable], Callable]:  # noqa: A002 (click's own keyword)
    return click.option(*decls, cls=GlobalOption, is_flag=True, expose_value=False, callback=_set_flag, help=help)


#: The global options, defined once: the root group and every :class:`Command` take each of them, with the same
#: effect before the command's name and after it. The flags set the :class:`Settings` field of their name.
GLOBAL_OPTIONS: tuple[Callable[[Callable], Callable], ...] = (
    _flag("-q", "--quiet", help="Print only results and errors."),
    _flag("-v", "--verbose", help="Name every file skipped (by default counted by kind)."),
    _flag("--no-progress", help="Never show progress bars."),
    click.version_option(__version__, prog_name="expo-prof", cls=GlobalOption),
)

#: What every help says above the global options (at most 80 columns wide once wrapped, like the rest).
GLOBAL_NOTE = ("Each works before or after the command's name, with the same effect: expo-prof -q analyze X is "
               "expo-prof analyze X -q. Given in both places, a flag is simply on (flags only turn on, so the two "
               "places always agree).")


def global_params() -> list[click.Parameter]:
    """New instances of :data:`GLOBAL_OPTIONS`, in their order, for one command (a parameter belongs to one)."""

    def holder() -> None: ...

    for opt in reversed(GLOBAL_OPTIONS):
        holder = opt(holder)
    return list(reversed(holder.__click_params__))  # type: ignore[attr-defined]  # click stacks them reversed


def _format_options(cmd: click.Command, ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """The command's own options, then the global ones under their own heading with :data:`GLOBAL_NOTE`."""
    own: list[tuple[str, str]] = []
    common: list[tuple[str, str]] = []
    for param in cmd.get_params(ctx):
        rec = param.get_help_record(ctx)
        if rec is not None and not isinstance(param, click.Argument):
            (common if isinstance(param, GlobalOption) else own).append(rec)
    if own:
        with formatter.section("Options"):
            formatter.write_dl(own)
    if common:
        with formatter.section("Global options"):
            formatter.write_text(GLOBAL_NOTE)
            formatter.write_paragraph()
            formatter.write_dl(common)


class Command(click.Command):
    """Every subcommand: its help laid out by :class:`HelpFormatter`, and the global options after its own."""

    context_class = HelpContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(global_params())

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _format_options(self, ctx, formatter)


class Group(click.Group):
    """The root: its help laid out by :class:`HelpFormatter`, with the global options; it takes only commands
    built as :class:`Command` (each of which takes the global options too)."""

    context_class = HelpContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(global_params())

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _format_options(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if not isinstance(cmd, Command):
            raise TypeError(f"{cmd.name}: build commands with expo_prof.cli.base.command (the global options)")
        super().add_command(cmd, name)


def command(name: str, *, summary: str, examples: Iterable[str] = (), **kw: Any) -> Callable:
    """A click command with ``summary`` as its short help, ``examples`` and the exit codes as its epilog, and the
    global options (:class:`Command`)."""
    lines = [ln for e in examples for ln in example_lines(e)]
    epilog = ("\b\nExamples:\n" + "\n".join(lines) + "\n\n" if lines else "") + EXIT_CODES

    def deco(f: Callable) -> click.Command:
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

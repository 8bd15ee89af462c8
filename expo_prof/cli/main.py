"""Root click group, the shared settings object and error handling.

Every command lives in its own module under :mod:`expo_prof.cli` and is
registered here. A command signals failure by raising
:class:`expo_prof.errors.ExpoProfError`; :func:`main` turns it into one line on
stderr and its exit code, never a traceback.
"""

from __future__ import annotations

import signal
import sys

import click

from expo_prof.cli.base import Group, Settings
from expo_prof.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, ExpoProfError

__all__ = ["Settings", "cli", "main"]


# The root's options, -q, -v, --no-progress and --version, are the global options (expo_prof.cli.base.GLOBAL_OPTIONS):
# Group adds them here and Command to every command, so each works before the command's name and after it.
@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 80})
@click.pass_context
def cli(ctx: click.Context) -> None:
    """expo-prof: how much of vLLM's exponential sampling hides under the forward pass.

    \b
    I have a trace:        expo-prof analyze TRACE_OR_DIR
                           (then: timeline, report, export)
    I have a vLLM server:  expo-prof record -- vllm serve MODEL
                           (switch it on? expo-prof ab --switchback -- …)

    Exit codes (every command): 0 done, 1 nothing found, 2 bad input or options,
    3 a launched server failed, 130 interrupted. docs/cli.md has the details.
    """
    ctx.ensure_object(Settings)  # set by the global options' callbacks already; the command shares it


def _register() -> None:
    """The commands, listed explicitly: a broken command module is an error, never a silently missing command."""
    from expo_prof.cli import ab, analyze, collect, compare, demo, export, record, report, timeline, verify

    for mod in (analyze, timeline, report, export, record, collect, ab, compare, demo, verify):
        cli.add_command(mod.command)


_register()


#: The signals that end a command: each ends it the way Ctrl-C does (workers stopped, temporary files removed:
#: expo_prof/output.py, expo_prof/pipeline/parallel.py), then exits 128 + its number (SIGINT 130, SIGTERM 143,
#: SIGHUP 129). SIGINT keeps Python's own handler (it raises KeyboardInterrupt already, and asyncio.run — record's
#: load — takes Ctrl-C over only from that handler); the other two get :func:`_end`.
ENDING_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
_RAISED_BY_US = ("SIGTERM", "SIGHUP")
#: The first ending signal received (its number), once one arrived.
_received: list[int] = []


def _end(signum: int, frame) -> None:  # noqa: ARG001
    """The first ending signal raises KeyboardInterrupt where the command is, so every ``finally`` and
    ``except BaseException`` on the way out cleans up; later ones (a second Ctrl-C while it cleans up) are
    swallowed: the command is already ending, and a KeyboardInterrupt inside the cleanup would cut it short
    and print a traceback. A Python handler, not SIG_IGN: a program started meanwhile gets the defaults."""
    if _received:
        return
    _received.append(signum)
    raise KeyboardInterrupt


def _catch_signals() -> None:
    for name in _RAISED_BY_US:
        sig = getattr(signal, name, None)
        # A signal ignored when we were started (``nohup``: SIGHUP) stays ignored.
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _end)


def _interrupted() -> None:
    """One line for an ending signal, and its exit code."""
    from expo_prof.console import err_console

    # Nothing is started from here on: a later signal is ignored outright, or it would cut this line short or
    # kill the interpreter while it shuts down (its handlers are back to the defaults then).
    for n in ENDING_SIGNALS:
        if (s := getattr(signal, n, None)) is not None:
            signal.signal(s, signal.SIG_IGN)
    signum = _received[0] if _received else signal.SIGINT
    name = "" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})"
    err_console.print(f"[red]error:[/] interrupted{name}")
    sys.exit(EXIT_INTERRUPTED if signum == signal.SIGINT else 128 + signum)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI, map errors to one line + exit code."""
    from expo_prof.console import err_console, fit_streams

    fit_streams()
    _catch_signals()
    try:
        # standalone_mode=False: click returns ctx.exit() codes and a command's
        # int return value instead of calling sys.exit itself.
        rv = cli.main(args=argv, prog_name="expo-prof", standalone_mode=False)
    except ExpoProfError as exc:
        from expo_prof.console import safe as escape  # markup escaped, control / bidi characters visible

        # What was gathered before the failure (e.g. "gzip stream is truncated") explains it: always shown.
        for w in getattr(exc, "warnings", []):
            err_console.print(f"[yellow]warning:[/] {escape(w)}")
        # A message of several lines (a server's cause, then its log's last lines) prints as lines: each
        # escaped alone, so a newline stays a line break while the control characters inside stay visible.
        first, *rest = str(exc).split("\n")
        err_console.print(f"[red]error:[/] {escape(first)}")
        for line in rest:
            err_console.print(f"  {escape(line)}")
        for d in getattr(exc, "details", []):
            err_console.print(f"  - {escape(d)}")
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _interrupted()
    except click.ClickException as exc:
        # One error style for every failure: click's own usage errors too ("error: …", one line, exit 2).
        from expo_prof.console import safe as escape  # markup escaped, control / bidi characters visible

        msg = " ".join(exc.format_message().split())
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None and isinstance(exc, click.UsageError) else ""
        err_console.print(f"[red]error:[/] {escape(msg)}{escape(hint)}")
        sys.exit(EXIT_BAD_INPUT if exc.exit_code in (1, 2) else exc.exit_code)
    except KeyboardInterrupt:
        _interrupted()
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(rv if isinstance(rv, int) else 0)

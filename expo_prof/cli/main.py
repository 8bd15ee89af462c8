"""Root click group, the shared settings object and error handling.

Every command lives in its own module under :mod:`expo_prof.cli` and is
registered here. A command signals failure by raising
:class:`expo_prof.errors.ExpoProfError`; :func:`main` turns it into one line on
stderr and its exit code, never a traceback.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from expo_prof import __version__
from expo_prof.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, ExpoProfError


@dataclass
class Settings:
    """Options of the root group, handed to every command as ``ctx.obj``."""

    quiet: bool = False
    no_progress: bool = False


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="expo-prof")
@click.option("-q", "--quiet", is_flag=True, help="Print only results and errors.")
@click.option("--no-progress", is_flag=True, help="Never show progress bars.")
@click.pass_context
def cli(ctx: click.Context, quiet: bool, no_progress: bool) -> None:
    """expo-prof: how much of vLLM's exponential sampling hides under the forward pass."""
    ctx.obj = Settings(quiet=quiet, no_progress=no_progress)


def _register() -> None:
    # Commands are imported here (not at module top) so that a broken command
    # module cannot break `expo-prof --help` for the others.
    import importlib

    for name in ("analyze", "demo", "record", "timeline", "report", "export", "ab", "compare"):
        try:
            mod = importlib.import_module(f"expo_prof.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"expo_prof.cli.{name}":
                continue  # command not built yet
            raise
        cli.add_command(mod.command)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI, map errors to one line + exit code."""
    from expo_prof.console import err_console

    try:
        # standalone_mode=False: click returns ctx.exit() codes and a command's
        # int return value instead of calling sys.exit itself.
        rv = cli.main(args=argv, prog_name="expo-prof", standalone_mode=False)
    except ExpoProfError as exc:
        from rich.markup import escape

        # What was gathered before the failure (e.g. "gzip stream is truncated") explains it: always shown.
        for w in getattr(exc, "warnings", []):
            err_console.print(f"[yellow]warning:[/] {escape(w)}")
        err_console.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err_console.print("[red]error:[/] interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_BAD_INPUT if exc.exit_code == 1 else exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("[red]error:[/] interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(rv if isinstance(rv, int) else 0)

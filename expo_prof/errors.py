"""Errors that carry their exit code, so every command fails with one clear line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

#: Exit codes shared by every command.
EXIT_OK = 0
EXIT_NOT_FOUND = 1  # input fine, but no target instance / nothing to report
EXIT_BAD_INPUT = 2  # unreadable, malformed or unusable input, bad arguments
EXIT_RUN_FAILED = 3  # a launched command / server failed
EXIT_INTERRUPTED = 130


def _swallow(signum, frame) -> None:  # noqa: ARG001
    """A signal that arrives while a command cleans up after the first: the command is already ending."""


@contextmanager
def signals_held() -> Iterator[None]:
    """Inside (the clean-up after an interrupt: removing a temporary file, ending workers) a further Ctrl-C,
    SIGTERM or SIGHUP is swallowed rather than raised into the clean-up, cutting it short with a traceback.
    Outside the main thread (where signals cannot be handled) it does nothing."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = [s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s]
    old = {s: signal.signal(s, _swallow) for s in held}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


class ExpoProfError(Exception):
    """A user-facing failure: printed as one line, exits with ``exit_code``."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, exit_code: int | None = None, *, warnings: list[str] | None = None,
                 details: list[str] | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
        #: Warnings gathered before the failure (e.g. while reading): printed before the error line.
        self.warnings: list[str] = list(warnings or [])
        #: A long error's parts, printed as a short indented list under its one line (what was looked for …).
        self.details: list[str] = list(details or [])


class BadInput(ExpoProfError):
    """The input cannot be used (missing, malformed, wrong format)."""

    exit_code = EXIT_BAD_INPUT


class NothingFound(ExpoProfError):
    """The input was read but holds nothing to analyse."""

    exit_code = EXIT_NOT_FOUND


#: Optional extras of the package (pyproject.toml): what each brings, for the one-line error when it is missing.
EXTRAS = {"serve": "aiohttp", "compare-html": "plotly"}


def import_extra(extra: str, what: str):
    """The module of optional extra ``extra`` (:data:`EXTRAS`), imported; a one-line :class:`BadInput` naming
    the extra when it is not installed (the laptop install analyses traces without either)."""
    import importlib

    module = EXTRAS[extra]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BadInput(f"{what} needs {module}, an optional extra: pip install 'expo-prof[{extra}]'") from None

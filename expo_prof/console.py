"""The one rich console of the CLI (stdout) and one for diagnostics (stderr)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from expo_prof.words import visible

#: What a stream that cannot hold them (a non-UTF-8 locale: ``LC_ALL=POSIX PYTHONUTF8=0``) gets instead of the
#: non-ASCII characters the CLI prints itself: units and signs stay readable (``12.3 us``, ``~48``).
ASCII_FOR = str.maketrans({
    "µ": "u", "—": "--", "–": "-", "−": "-", "…": "...", "×": "x", "→": "->", "←": "<-", "≈": "~", "±": "+/-",
    "≤": "<=", "∪": "|", "∩": "&", "≥": ">=", "─": "-", "‘": "'", "’": "'", "“": '"', "”": '"', "▶": ">", "◀": "<", "•": "*",
})


class AsciiText:
    """A text stream whose encoding cannot hold the CLI's own characters, written through :data:`ASCII_FOR`;
    anything else it cannot hold (a trace's name) becomes a ``\\uXXXX`` escape instead of a UnicodeEncodeError.
    Everything else (``isatty``, ``fileno``, ``encoding`` for rich's box characters) is the stream's own."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        enc = self._stream.encoding or "ascii"
        self._stream.write(text.translate(ASCII_FOR).encode(enc, "backslashreplace").decode(enc))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def holds_unicode(stream) -> bool:
    """Whether ``stream`` can print the CLI's own characters (``µ``, ``—``, ``…``)."""
    try:
        "µ—…×→".encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def fit_streams() -> None:
    """Called once at the CLI's start: stdout and stderr in a locale that cannot encode the units (``µs``) are
    written through :class:`AsciiText` — ``us``, ``~``, ``--`` — never a UnicodeEncodeError traceback."""
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, AsciiText) and not holds_unicode(stream):
            setattr(sys, name, AsciiText(stream))


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

"""The one rich console of the CLI (stdout) and one for diagnostics (stderr)."""

from __future__ import annotations

import re

from rich.cells import cell_len
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


#: Holds a figure to its unit and a command's words together while rich lays a line out: not whitespace, so
#: rich never breaks a line there, one cell wide like the space it stands for; written out as a space.
GLUE = "\ue000"
#: A figure and its unit (``10.95 ms``, ``12.3 µs``, ``+2.3 %``, ``48 steps``, ``137 events``) …
_UNITS = ("ns|µs|us|ms|s|%|kB|MB|GB|bytes?|steps?|ranks?|runs?|tok/s"
          "|events?|timelines?|recordings?|files?|instances?")  # counts are figures too: "137 events"
_FIGURE = re.compile(rf"(?<![\w.])([-+−~]?\d[\d,.]*) ({_UNITS})(?![\w])")
#: … and a command in backticks (``expo-prof record --overlay switchback -- CMD``).
_COMMAND = re.compile(r"`[^`\n]+`")
#: Spaces at the end of a line (before any closing style codes): a table pads its cells to the width.
_TRAILING = re.compile(r"[ ]+((?:\x1b\[[0-9;]*m)*)$", re.M)


def glue(text: str) -> str:
    """``text`` with the spaces inside a figure (number and unit) and inside a backticked command made
    unbreakable (:data:`GLUE`): a line is wrapped between words, never inside either."""
    text = _FIGURE.sub(lambda m: f"{m.group(1)}{GLUE}{m.group(2)}", text)
    return _COMMAND.sub(lambda m: m.group().replace(" ", GLUE), text)


class TextConsole(Console):
    """The CLI's rich console: one place for the layout rules of text for people (docs/cli.md, "Text for
    people") — a figure and its unit, and a command, never break across lines; a table that does not fit is
    printed as wide as its figures need (labels wrap first; a figure is never cut); no line ends in spaces."""

    def render_str(self, text: str, **kwargs):
        return super().render_str(glue(text), **kwargs)

    def print(self, *objects, **kwargs) -> None:
        from rich.table import Table

        if kwargs.get("width") is None and len(objects) == 1 and isinstance(objects[0], Table):
            wider = self._fit_columns(objects[0])
            if wider is not None:
                # Even wrapped to its words it does not fit: printed as wide as its figures and longest words
                # need (rich's shares would cut a column); rich clamps print(width=) to the console's, so widen that.
                old = self._width
                self.width = wider
                try:
                    super().print(*objects, **kwargs)
                finally:
                    self._width = old
                return
        super().print(*objects, **kwargs)

    def _fit_columns(self, table) -> int | None:
        """Give each column of ``table`` its width for this console; the wider width to print it at when it
        cannot fit even wrapped (None: it fits the console).

        A column may wrap between words unless its author said no (a figure is one word: render_str glued it).
        rich shares a narrow width out in proportion, which leaves one label in thin slices beside a roomy
        column and cuts what does not fit; here each column is held between what it cannot do without (its
        longest word, or its widest cell where it does not wrap) and its widest cell, and the widest wrapping
        column gives up a cell at a time until the table fits — labels wrap evenly, figures stay whole."""
        from rich.measure import Measurement

        cols = table.columns
        lo: list[int] = []
        hi: list[int] = []
        for col in cols:
            cells = [self.render_str(c).plain for c in (col.header, *col._cells) if isinstance(c, str)]
            lines = [ln for c in cells for ln in c.splitlines()] or [""]
            words = lines if col.no_wrap else [w for c in cells for w in c.split()]
            lo.append(max([col.min_width or 0, *map(cell_len, words)]))
            widest = max([lo[-1], *map(cell_len, lines)])
            hi.append(widest if col.max_width is None else max(lo[-1], min(widest, col.max_width)))
            col.min_width = lo[-1]
        fit = Measurement.get(self, self.options.update_width(1 << 16), table)
        if fit.maximum <= self.width:
            return None
        target = max(self.width, fit.minimum)
        if not all(isinstance(c, str) for col in cols for c in (col.header, *col._cells)):
            return None if target == self.width else fit.maximum  # not measured here: unwrapped, as wide as it is
        # The table's own width beyond its cells (padding, borders): what is left for the cells.
        room = target - (fit.maximum - sum(hi))
        width = list(hi)
        free = [i for i, col in enumerate(cols) if not col.no_wrap and col.width is None]
        while sum(width) > room:
            narrower = [i for i in free if width[i] > lo[i]]
            if not narrower:
                return fit.maximum  # (a width held by its author): unwrapped, as wide as it is
            width[max(narrower, key=lambda i: width[i])] -= 1
        for i in free:
            cols[i].width = width[i]
        return None if target == self.width else target

    def _render_buffer(self, buffer) -> str:
        return _TRAILING.sub(r"\1", super()._render_buffer(buffer)).replace(GLUE, " ")


console = TextConsole(highlight=False, soft_wrap=False)
err_console = TextConsole(stderr=True, highlight=False, soft_wrap=True)


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

"""Options and output shared by the commands that analyse (analyze, timeline, report, export)."""

from __future__ import annotations

import re

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

#: --max-bytes when it is not given, as written on the command line: ``parse_size(DEFAULT_MAX_BYTES)`` is
#: expo_prof.readers.file_bytes.DEFAULT_MAX_DECOMPRESSED (tests/readers/test_hostile_memory.py checks it; that
#: module is not imported here, to keep --help fast).
DEFAULT_MAX_BYTES = "4G"

#: --op / --source / --max-bytes: what every analysing command takes, validated once by Options.make.
_TARGET_OPTIONS = (
    click.option("--op", metavar="REGEX",
                 help="Analyse events whose name matches REGEX (e.g. nccl) instead of the exponential draw."),
    click.option("--source", type=click.Choice(["auto", "trace", "overlay-log"]), default="auto", show_default=True,
                 help="Where a rank has both a trace and an overlay event log, which one counts."),
    click.option("--max-bytes", metavar="SIZE",
                 help=f"Cap on the decompressed size of one input file: bytes, or with a unit K, M, G or T "
                      f"(powers of 1024), e.g. 800M; default {DEFAULT_MAX_BYTES}, i.e. 4.29 GB. A gzip bomb is "
                      "refused at the cap while it is read."),
    click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, metavar="N",
                 help="Read and analyse files in N worker processes (default: the number of cores; "
                      "inputs holding under 16 MiB of data, decompressed, are read in one)."),
    click.option("--ray", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
                 help="Read and analyse on a Ray cluster, each file on the node that holds it (NODE:PATH inputs); "
                      "ADDRESS as ray.init takes it (auto, HOST:PORT, ray://HOST:PORT); alone: as ray.init() "
                      "does, RAY_ADDRESS or the Ray running on this machine, else a new one on 127.0.0.1 "
                      "(give --ray after the PATHs or as --ray=ADDRESS)."),
)


def target_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--op``, ``--source``, ``--max-bytes``, ``--jobs`` and ``--ray`` to a command."""
    for opt in reversed(_TARGET_OPTIONS):
        f = opt(f)
    return f


def options(op: str | None, source: str, max_bytes: str | None, jobs: int | None = None, ray: str | None = None,
            *, events: bool = True):
    """The pipeline's Options from the command line (BadInput on a bad regex / size / address).

    ``events``: the command draws the counted events (timeline, export); otherwise a parallel read
    sends back only compact per-file results."""
    from expo_prof.errors import BadInput
    from expo_prof.pipeline import Options
    from expo_prof.pipeline.parallel import cores

    if ray and (Path(ray).exists() or (":/" in ray and "://" not in ray)):
        # `--ray PATH` / `--ray NODE:/PATH`: click took the first PATH as the optional address.
        raise BadInput(f"--ray took {ray!r} as its address; put --ray after the PATHs, or write --ray=ADDRESS")

    opts = Options.make(op=op, source=source, max_bytes=max_bytes, jobs=cores() if jobs is None else jobs,
                        ray=ray, events=events)
    ctx = click.get_current_context(silent=True)
    if ray is not None and not getattr(ctx.obj if ctx else None, "quiet", False):
        # Reaching or starting Ray takes seconds (a new local Ray: half a minute): say what the wait is for.
        from expo_prof.console import info

        where = f"the Ray cluster at {ray}" if ray not in ("", "auto", "local") else \
            "Ray (RAY_ADDRESS, else the one running here, else a new local one: about 30 s)"
        info(f"--ray: connecting to {where}; without --ray the files are read on this machine")
    return opts


#: Files skipped for one cause that are still named one by one; more are one line with their count (-v: all).
NAMED_SKIPS = 3
#: A pipeline warning about one file passed by (expo_prof.pipeline.run: "skipped PATH: WHY").
_SKIPPED = re.compile(r"skipped (?P<path>.+?): (?P<why>.+)", re.S)


def show_notes(settings: Any, warnings: list[str], info: list[str]) -> None:
    """Warnings (always, unless --quiet) and the info lines on stderr; names from traces escaped. The files
    skipped for one cause, past :data:`NAMED_SKIPS`, are one line with their count and first file (a folder of many unrecognised files would
    otherwise print one line per file); ``-v`` lists every one."""
    if getattr(settings, "quiet", False):
        return
    from expo_prof.console import info as info_line
    from expo_prof.console import safe as escape  # markup escaped, control / bidi characters visible
    from expo_prof.console import warn
    from expo_prof.terminal.closing import by_kind, skip_kind

    verbose = bool(getattr(settings, "verbose", False))
    skipped = [(m["path"], m["why"]) for m in map(_SKIPPED.fullmatch, warnings) if m is not None]
    counted = {} if verbose else {k: (n, first) for k, n, first in by_kind(skipped) if n > NAMED_SKIPS}
    for w in warnings:
        m = _SKIPPED.fullmatch(w)
        if m is None or skip_kind(m["why"]) not in counted:
            warn(escape(w))
    for kind, (n, first) in counted.items():
        warn(escape(f"skipped {n} files: {kind} (the first: {first}; -v lists each)"))
    for line in info:
        info_line(escape(line))


#: --format / --json / -o: where and how a command's result is written.
_OUTPUT_OPTIONS = (
    click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default=None,
                 help="text: tables (default); json: the versioned document; html: a self-contained page."),
    click.option("--json", "as_json", is_flag=True, help="Same as --format json."),
    click.option("-o", "--output", type=click.Path(path_type=Path), default=None, metavar="FILE",
                 help="Write to FILE instead of stdout (never over an input or a file expo-prof did not write)."),
)


def output_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--format``, ``--json`` and ``-o/--output`` to a command."""
    for opt in reversed(_OUTPUT_OPTIONS):
        f = opt(f)
    return f


def resolve_format(fmt: str | None, as_json: bool, output: Path | None) -> str:
    """The output format: ``--json`` is ``--format json``; an html page needs ``-o`` (never a page on a terminal)."""
    from expo_prof.errors import BadInput

    if as_json and fmt not in (None, "json"):
        raise BadInput(f"--json cannot be combined with --format {fmt}")
    fmt = "json" if as_json else (fmt or "text")
    if fmt == "html" and output is None:
        raise BadInput("--format html writes a page: give the file with -o FILE.html")
    return fmt


def check_output(output: Path | None, inputs: list[Path], fmt: str) -> None:
    """The one output guard (expo_prof/output.py) for ``-o`` in ``fmt``."""
    if output is None:
        return
    from expo_prof.output import ANALYZE_JSON, PAGE, TEXT, check_target

    check_target(output, inputs, {"json": ANALYZE_JSON, "html": PAGE, "text": TEXT}[fmt], "-o")


def says(output: Path | None) -> Any:
    """The console for a command's summary lines: stderr when ``-o`` is stdout (``-``, ``/dev/stdout``), so the
    output there stays whole; stdout otherwise."""
    from expo_prof.console import console, err_console
    from expo_prof.output import is_stdout

    return err_console if is_stdout(output) else console


def write_report(reporter: Any, result: Any, output: Path | None) -> None:
    """Render ``result`` with ``reporter`` to stdout, or atomically to ``output``."""
    import io
    import sys

    if output is None:
        reporter.render(result, None if type(reporter).__name__ == "TableReporter" else sys.stdout)
        return
    from expo_prof.output import write, write_chunks

    chunks = getattr(reporter, "chunks", None)
    if chunks is not None:  # bytes made piece by piece (the JSON document): no str copy of them
        write_chunks(output, chunks(result))
        return

    buf = io.StringIO()
    reporter.render(result, buf)
    write(output, buf.getvalue())

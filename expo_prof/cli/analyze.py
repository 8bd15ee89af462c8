"""``expo-prof analyze PATH…``: hidden vs exposed exponential (or ``--op``) time from traces."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from expo_prof.cli.common import options, show_notes, target_options
from expo_prof.errors import BadInput

#: Show a progress bar only when the inputs are at least this large on disk
#: (``EXPO_PROF_PROGRESS_MIN_BYTES`` overrides it).
PROGRESS_MIN_BYTES = 32 << 20


def _progress_min_bytes() -> int:
    raw = os.environ.get("EXPO_PROF_PROGRESS_MIN_BYTES", "")
    return int(raw) if raw.strip().isdigit() else PROGRESS_MIN_BYTES



def _total_size(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            for root, _dirs, files in os.walk(p):
                for f in files:
                    try:
                        total += os.stat(os.path.join(root, f)).st_size
                    except OSError:
                        pass
    return total


@click.command("analyze")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@target_options
@click.option(
    "--json",
    "json_out",
    is_flag=False,
    flag_value="-",
    default=None,
    metavar="[FILE|-]",
    help="Write the versioned JSON result (docs/json-output.md) to FILE, or to stdout with '-' / no value.",
)
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows in the worst-steps table.")
@click.pass_obj
def command(settings, paths: tuple[Path, ...], op: str | None, source: str, max_bytes: str | None,
            json_out: str | None, top: int) -> int:
    """Split the exponential draw's time into hidden (under other lanes' compute) and exposed.

    PATH is a trace file or a directory (walked recursively, many ranks at
    once): PyTorch profiler traces (.json/.json.gz), torch_npu / msprof output,
    or the overlay's event logs. Each recording (one profile window of one
    job) gets its own figures. Exit codes: 0 ok, 1 no target instance found,
    2 bad input.
    """
    from expo_prof.console import err_console
    from expo_prof.pipeline import run

    quiet = bool(getattr(settings, "quiet", False))
    no_progress = bool(getattr(settings, "no_progress", False))
    path_list = list(paths)
    if json_out is not None:
        from expo_prof.output import ANALYZE_JSON, check_target

        check_target(json_out, path_list, ANALYZE_JSON, "--json")
    if not path_list:
        raise BadInput("analyze needs at least one PATH (a trace file or a directory)")
    opts = options(op, source, max_bytes)

    show_progress = not no_progress and not quiet and err_console.is_terminal
    total = _total_size(path_list) if show_progress else 0
    if show_progress and total >= _progress_min_bytes():
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        with Progress(
            TextColumn("reading traces"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
            console=err_console, transient=True,
        ) as bar:
            task = bar.add_task("read", total=total)

            def advance(done: int, of: int) -> None:
                bar.update(task, completed=done, total=of)

            result = run(path_list, opts, progress=advance)
    else:
        result = run(path_list, opts)
    doc = result.document
    show_notes(settings, result.warnings, result.info)

    from expo_prof.report import JsonReporter, TableReporter

    if json_out == "-":
        JsonReporter().render(doc, sys.stdout)
        return 0
    TableReporter(top=top).render(doc)
    if json_out is not None:
        try:
            with open(json_out, "w", encoding="utf-8") as f:
                JsonReporter().render(doc, f)
        except OSError as exc:
            raise BadInput(f"--json {json_out}: cannot write ({exc.strerror or exc})") from None
    return 0

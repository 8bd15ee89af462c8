"""``expo-prof analyze PATH…``: hidden vs exposed exponential (or ``--op``) time from traces."""

from __future__ import annotations

import os
from pathlib import Path

import click

from expo_prof.cli.base import command as cli_command
from expo_prof.cli.common import (
    check_output,
    options,
    output_options,
    resolve_format,
    says,
    show_notes,
    target_options,
    write_report,
)
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


@cli_command(
    "analyze",
    summary="Hidden vs exposed time of the exponential draw (or any --op) in traces.",
    examples=[
        "expo-prof analyze trace.pt.trace.json.gz",
        "expo-prof analyze traces/RUN --json -o analysis.json",
        "expo-prof analyze PROFILER_DIR EXPO_PROF_OUT        # a trace and the overlay's event logs",
        "expo-prof analyze hta_trace.json.gz --op nccl       # any side-lane op, e.g. NCCL under compute",
        "expo-prof analyze RUN --format html -o report.html  # the report page of the result",
    ],
)
@click.argument("paths", nargs=-1, metavar="PATH...", type=click.Path(path_type=Path))
@target_options
@output_options
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows in the worst-steps table.")
@click.pass_obj
def command(settings, paths: tuple[Path, ...], op: str | None, source: str, max_bytes: str | None, jobs, ray,
            fmt: str, as_json: bool, output: Path | None, top: int) -> int:
    """Split the time of the exponential draw (or of any op matched by --op) into hidden — under
    another lane's compute on the same device — and exposed, per recording, rank and step.

    PATH is a trace file or a folder (walked recursively, many ranks at once):
    PyTorch profiler traces (.json / .json.gz), Nsight Systems exports
    (.sqlite, from nsys export --type sqlite) and reports (.nsys-rep, with nsys
    installed), torch_npu output (*_ascend_pt), msprof output (PROF_*),
    expo-prof run or session directories, or the overlay's event logs. Each recording (one profile window of one job) gets
    its own figures and headline.
    """
    from expo_prof.console import err_console
    from expo_prof.pipeline import run

    quiet = bool(getattr(settings, "quiet", False))
    no_progress = bool(getattr(settings, "no_progress", False))
    path_list = list(paths)
    fmt = resolve_format(fmt, as_json, output)
    check_output(output, path_list, fmt)
    if not path_list:
        raise BadInput("analyze needs at least one PATH (a trace file or a directory)")
    opts = options(op, source, max_bytes, jobs, ray, events=False)

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
    show_notes(settings, result.warnings, result.info)

    from expo_prof.html import HtmlReporter
    from expo_prof.terminal import JsonReporter, TableReporter

    files = len({tl.source for rr in result.recordings for tl in rr.timelines})
    reporter = {"text": TableReporter(top=top, files=files), "json": JsonReporter(), "html": HtmlReporter(label="analysis")}[fmt]
    write_report(reporter, result.document, output)
    if output is not None and not quiet:
        says(output).print(f"{fmt}: {output}")
    return 0

"""``expo-prof analyze PATH…``: hidden vs exposed exponential (or ``--op``) time from traces."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click

from expo_prof.errors import BadInput

#: Show a progress bar only when the inputs are at least this large on disk
#: (``EXPO_PROF_PROGRESS_MIN_BYTES`` overrides it).
PROGRESS_MIN_BYTES = 32 << 20


def _progress_min_bytes() -> int:
    raw = os.environ.get("EXPO_PROF_PROGRESS_MIN_BYTES", "")
    return int(raw) if raw.strip().isdigit() else PROGRESS_MIN_BYTES

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"800M"``, ``"4GiB"``, ``"1.5g"``, ``"1000000"`` → bytes (powers of 1024 for suffixes)."""
    m = _SIZE_RE.match(text)
    if not m:
        raise BadInput(f"--max-bytes {text!r}: expected a size such as 800M, 4G or 1000000")
    value = float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2).lower() or "_")
    if value < 1:
        raise BadInput(f"--max-bytes {text!r}: must be at least 1 byte")
    return int(value)


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


def _check_json_target(target: str, paths: list[Path]) -> None:
    """Never overwrite an input (``--json trace.json.gz`` takes the trace as the output file)."""
    if target == "-":
        return
    out = Path(target)
    hint = "put --json last, or write --json=FILE / --json=-"
    if not paths:
        if out.exists():
            raise BadInput(f"--json took {target!r} as its output file and no input path is left; {hint}")
        return
    resolved = out.resolve()
    if any(resolved == p.resolve() for p in paths):
        raise BadInput(f"--json {target!r} would overwrite an input; {hint}")
    if out.is_dir():
        raise BadInput(f"--json {target!r} is a directory")
    if out.exists() and out.stat().st_size:
        with open(out, "rb") as f:
            head = f.read(4096)
        if b'"schema_name"' not in head or b"expo-prof.analyze" not in head:
            raise BadInput(f"--json {target!r} exists and is not an earlier analyze output; refusing to overwrite it")


@click.command("analyze")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--op", metavar="REGEX", help="Analyse events whose name matches REGEX instead of the exponential draw (e.g. nccl).")
@click.option(
    "--json",
    "json_out",
    is_flag=False,
    flag_value="-",
    default=None,
    metavar="[FILE|-]",
    help="Write the versioned JSON result (docs/json-output.md) to FILE, or to stdout with '-' / no value.",
)
@click.option("--max-bytes", metavar="SIZE", help="Cap on the decompressed size of one input file (e.g. 800M, 4G).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows in the worst-steps table.")
@click.pass_obj
def command(settings, paths: tuple[Path, ...], op: str | None, json_out: str | None, max_bytes: str | None, top: int) -> int:
    """Split the exponential draw's time into hidden (under other lanes' compute) and exposed.

    PATH is a trace file or a directory (walked recursively, many ranks at
    once): PyTorch profiler traces (.json/.json.gz), torch_npu / msprof output,
    or the overlay's event logs. Exit codes: 0 ok, 1 no target instance found,
    2 bad input.
    """
    from expo_prof.console import err_console, warn

    quiet = bool(getattr(settings, "quiet", False))
    no_progress = bool(getattr(settings, "no_progress", False))
    path_list = list(paths)
    if json_out is not None:
        _check_json_target(json_out, path_list)
    if not path_list:
        raise BadInput("analyze needs at least one PATH (a trace file or a directory)")
    for p in path_list:
        if not p.exists():
            raise BadInput(f"{p}: no such file or directory")
    kwargs = {}
    if max_bytes is not None:
        kwargs["max_bytes"] = parse_size(max_bytes)
    if op is not None:
        try:
            re.compile(op)
        except re.error as exc:
            raise BadInput(f"--op {op!r} is not a valid regular expression: {exc}") from None

    from expo_prof import readers
    from expo_prof.analysis import analyze

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

            loaded = readers.load(path_list, progress=advance, **kwargs)
    else:
        loaded = readers.load(path_list, **kwargs)

    from expo_prof.runs import run_labels

    result = analyze(
        loaded.timelines,
        op=op,
        inputs=[str(p) for p in path_list],
        warnings=loaded.warnings,
        skipped=loaded.skipped,
        # Rank 0 of two runs (analyze off/ on/) is two ranks: group by run too.
        runs=run_labels(loaded.timelines, path_list),
    )
    if not quiet:
        from rich.markup import escape

        for w in result.warnings:
            warn(escape(w))
        for path, reason in result.skipped:
            warn(f"skipped {escape(path)}: {escape(reason)}")

    from expo_prof.report import JsonReporter, TableReporter

    if json_out == "-":
        JsonReporter().render(result, sys.stdout)
        return 0
    TableReporter(top=top).render(result)
    if json_out is not None:
        try:
            with open(json_out, "w", encoding="utf-8") as f:
                JsonReporter().render(result, f)
        except OSError as exc:
            raise BadInput(f"--json {json_out}: cannot write ({exc.strerror or exc})") from None
    return 0

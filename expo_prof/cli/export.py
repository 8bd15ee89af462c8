"""``expo-prof export RUN -o annotated.json``: the source trace (JSON: whole; Perfetto: its timed events) with
hidden/exposed/instance/step tracks."""

from __future__ import annotations

from pathlib import Path

import click

from expo_prof.words import plural
from expo_prof.cli.base import command as cli_command
from expo_prof.cli.common import options, says, show_notes, target_options


@cli_command(
    "export",
    summary="The recording's traces as one Chrome-trace JSON (whole) or Perfetto trace (their timed events), with the "
            "analysis as tracks.",
    examples=[
        "expo-prof export traces/RUN -o annotated.json.gz    # open in Perfetto UI or chrome://tracing",
        "expo-prof export trace.json.gz --op nccl -o nccl.json",
        "expo-prof export traces/RUN --format perfetto -o run.pftrace   # Perfetto's own protobuf",
    ],
)
@click.argument("paths", nargs=-1, metavar="PATH...", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="The file to write: .json / .json.gz (default annotated.json), or .pftrace with --format perfetto "
                   "(default annotated.pftrace).")
@click.option("--format", "fmt", type=click.Choice(["json", "perfetto"]), default="json", show_default=True,
              help="json: Chrome Trace Event JSON with every source event, flow, metadata entry and arg kept. "
                   "perfetto: Perfetto's native protobuf (TrackDescriptor/TrackEvent packets; no JSON-importer limits) "
                   "with every complete and instant event of the sources (Python stacks too) but no args, metadata or "
                   "counters; the summary counts per category what is in the file and what is left out.")
@target_options
@click.pass_obj
def command(settings, paths, output, fmt, op, source, max_bytes, jobs, ray) -> int:
    """Write the run's traces as one file for Perfetto UI (or chrome://tracing, MindStudio
    Insight for JSON): the source trace as it was recorded (JSON), or its timed events
    (Perfetto), plus added tracks for each exponential instance, its hidden and exposed
    parts, and the steps.
    """
    from expo_prof import output as out_mod
    from expo_prof.export import export_document
    from rich.markup import escape

    if not paths:
        raise click.UsageError("export needs a run directory or trace PATHs")
    if output is None:
        output = Path("annotated.pftrace" if fmt == "perfetto" else "annotated.json")
    out_mod.check_target(output, list(paths), out_mod.PERFETTO if fmt == "perfetto" else out_mod.EXPORT)
    console = says(output)  # the summary: on stderr when the output is stdout
    doc = export_document(list(paths), fmt=fmt, options=options(op, source, max_bytes, jobs, ray))
    n = out_mod.write_chunks(output, doc.chunks)
    show_notes(settings, doc.warnings, doc.info)
    s = doc.stats
    ranks = s.get("ranks") or []
    where = f"from {plural(s['sources'], 'source')}, rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks))}"
    if fmt == "perfetto":
        what = f"{where}: {_by_category(s)}"
    else:
        what = f"{plural(s['source_events'], 'source event')} incl. {plural(s['flows'], 'flow event')} {where}"
    console.print(
        f"export: {escape(str(output))} ({n / 1e6:.1f} MB; {escape(what)} "
        f"+ {plural(s['instances'], 'instance')}, {s['hidden']} hidden / {s['exposed']} exposed slices, "
        f"{_steps(s)})"
    )
    console.print(escape(doc.headline))
    if doc.saving_line:
        console.print(escape(doc.saving_line))
    return 0


def _steps(s: dict) -> str:
    """The steps the export holds, counted as every command counts them (those holding a draw); the step
    windows without one are on the steps track too, and said (the warning above names them)."""
    drawn, windows = s.get("steps_drawn", s["steps"]), s["steps"]
    if drawn == windows:
        return plural(windows, "step")
    return f"{plural(drawn, 'step')} with a draw, of {windows} step windows on the steps track"


def _by_category(s: dict) -> str:
    """What a Perfetto export holds of its sources and what it leaves out, counted per category."""

    def listed(c: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))

    written, left = s["written"], s["left"]
    text = f"{sum(written.values())} source events in the file ({listed(written) or 'none'})"
    if not left:
        return text + ", none left out;"
    return (f"{text}, {sum(left.values())} left out ({listed(left)}; --format json passes Chrome-trace sources "
            "through whole);")

"""``expo-prof export RUN -o annotated.json``: a Chrome trace with hidden/exposed and step tracks added."""

from __future__ import annotations

from pathlib import Path

import click

from expo_prof.cli.base import command as cli_command
from expo_prof.cli.common import options, show_notes, target_options


@cli_command(
    "export",
    summary="The recording's traces as one Chrome-trace JSON with hidden/exposed/step tracks added.",
    examples=[
        "expo-prof export traces/RUN -o annotated.json.gz    # open in Perfetto UI or chrome://tracing",
        "expo-prof export trace.json.gz --op nccl -o nccl.json",
    ],
)
@click.argument("paths", nargs=-1, metavar="PATH...", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("annotated.json"), show_default=True,
              help="The Chrome-trace JSON to write (.json.gz compresses).")
@target_options
@click.pass_obj
def command(settings, paths, output, op, source, max_bytes, jobs, ray) -> int:
    """Write the run's traces as one Chrome-trace JSON (Perfetto UI, chrome://tracing,
    MindStudio Insight) with added tracks: each exponential instance, its hidden and
    exposed parts, and the steps.
    """
    from expo_prof.console import console
    from expo_prof import output as out_mod
    from expo_prof.html.build import export_document
    from rich.markup import escape

    if not paths:
        raise click.UsageError("export needs a run directory or trace PATHs")
    out_mod.check_target(output, list(paths), out_mod.EXPORT)
    doc = export_document(list(paths), options=options(op, source, max_bytes, jobs, ray))
    n = out_mod.write(output, doc.text)
    show_notes(settings, doc.warnings, doc.info)
    s = doc.payload
    console.print(
        f"export: {escape(str(output))} ({n / 1e6:.1f} MB; {s['events']} events + {s['instances']} instances, "
        f"{s['hidden']} hidden / {s['exposed']} exposed slices, {s['steps']} steps)"
    )
    console.print(escape(doc.headlines[0]))
    return 0

"""``expo-prof timeline RUN_OR_TRACE -o timeline.html``: one self-contained interactive timeline page."""

from __future__ import annotations

from pathlib import Path

import click

from expo_prof.cli.base import command as cli_command
from expo_prof.cli.common import options, says, show_notes, target_options
from expo_prof.html import lod


@cli_command(
    "timeline",
    summary="An interactive, self-contained HTML timeline of one recording: every draw split hidden/exposed.",
    examples=[
        "expo-prof timeline traces/RUN -o timeline.html",
        "expo-prof timeline rank0.pt.trace.json.gz -o t.html",
        "expo-prof timeline nccl_trace.json.gz --op nccl -o nccl.html",
    ],
)
@click.argument("paths", nargs=-1, metavar="PATH...", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("timeline.html"), show_default=True,
              help="The HTML file to write (self-contained: opens offline).")
@target_options
@click.option("--title", help="Page title (default: from the run).")
@click.option("--detail-budget", type=click.IntRange(min=0), default=lod.DETAIL_BUDGET, show_default=True,
              help="Other events drawn one by one; beyond it they merge into busy intervals per lane.")
@click.option("--busy-budget", type=click.IntRange(min=1), default=lod.BUSY_BUDGET, show_default=True,
              help="Merged busy intervals drawn; beyond it the smallest gaps close.")
@click.pass_obj
def command(settings, paths, output, op, source, max_bytes, jobs, ray, title, detail_budget, busy_budget) -> int:
    """Write an interactive timeline of one run: lanes per rank and stream/thread, every
    exponential draw split into its hidden and exposed parts, forward passes, sampler
    waits and steps.

    PATH is a run directory (from `expo-prof record`), or trace files /
    folders of one recording. The page needs no network: plotly.js and the data are inline.
    """
    from expo_prof import output as out_mod
    from expo_prof.html.build import timeline_document
    from rich.markup import escape

    if not paths:
        raise click.UsageError("timeline needs a run directory or trace PATH")
    out_mod.check_target(output, list(paths), out_mod.PAGE)
    console = says(output)  # the summary: on stderr when the output is stdout
    doc = timeline_document(
        list(paths), options=options(op, source, max_bytes, jobs, ray), title=title,
        detail_budget=detail_budget, busy_budget=busy_budget,
    )
    n = out_mod.write(output, doc.text)
    show_notes(settings, doc.warnings, doc.info)
    p = doc.payload
    console.print(
        f"timeline: {escape(str(output))} ({n / 1e6:.1f} MB; {len(p['inst']['start'])} instances, "
        f"{len(p['lanes'])} lanes; {escape(p['lod']['text'])})"
    )
    for line in doc.headlines:
        console.print(escape(line))
    return 0

"""``expo-prof report RUN [RUN…] -o report.html``: the summary page (A/B with overlay-off and -on runs)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("report.html"), show_default=True,
              help="The HTML file to write (self-contained: opens offline).")
@click.option("--op", metavar="REGEX", help="Report events whose name matches REGEX instead of the exponential draw.")
@click.option("--max-bytes", metavar="SIZE", help="Cap on the decompressed size of one input file (e.g. 800M, 4G).")
@click.option("--title", help="Page title.")
@click.pass_obj
def command(settings, paths, output, op, max_bytes, title) -> int:
    """Write the summary page of a run: hidden fraction, exposed and forward time per
    step, estimated tok/s effect, per-step chart and distribution, per-rank table, the
    manifest.

    RUN is a run directory, a session directory (its runs in order) or trace files.
    With overlay-off and overlay-on runs (two run directories, or a session of
    `record --overlay both`) the page adds an A/B section.
    """
    from expo_prof.cli.analyze import parse_size
    from expo_prof.console import console, warn
    from expo_prof.html import output as out_mod
    from expo_prof.html.build import report_document
    from rich.markup import escape

    if not paths:
        raise click.UsageError("report needs a run directory, a session directory or trace PATHs")
    out_mod.check_target(output, list(paths), out_mod.PAGE)
    doc = report_document(list(paths), op=op, max_bytes=parse_size(max_bytes) if max_bytes else None, title=title)
    n = out_mod.write(output, doc.text)
    if not getattr(settings, "quiet", False):
        for w in doc.warnings:
            warn(escape(w))
    p = doc.payload
    ab = " with an A/B section" if p["ab"] else ""
    console.print(f"report: {escape(str(output))} ({n / 1e6:.1f} MB; {len(p['runs'])} run(s){ab})")
    return 0

"""``expo-prof report RUN [RUN…] -o report.html``: the summary page (A/B with overlay-off and -on runs)."""

from __future__ import annotations

from pathlib import Path

import click

from expo_prof.cli.base import command as cli_command
from expo_prof.cli.common import options, says, show_notes, target_options


@cli_command(
    "report",
    summary="The summary page of recordings; with off/on runs, compare's A/B result on the same page.",
    examples=[
        "expo-prof report traces/RUN -o report.html",
        "expo-prof report traces/SESSION -o report.html     # off/on runs: adds the A/B section",
        "expo-prof report off/ on/ -o ab.html",
    ],
)
@click.argument("paths", nargs=-1, metavar="PATH...", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("report.html"), show_default=True,
              help="The HTML file to write (self-contained: opens offline).")
@target_options
@click.option("--title", help="Page title.")
@click.pass_obj
def command(settings, paths, output, op, source, max_bytes, jobs, ray, title) -> int:
    """Write the summary page of each recording: hidden fraction and headline, exposed, forward
    and sampler-wait time per step, the tok/s upper bound, per-step chart and distribution,
    per-rank table, the manifest.

    PATH is a run directory, a session directory (its runs in order) or trace files.
    With overlay-off and overlay-on runs (two run directories, or a session of
    `record --overlay both`) the page adds the A/B section: `expo-prof compare`'s result.
    """
    from expo_prof import output as out_mod
    from expo_prof.html.build import report_document
    from rich.markup import escape

    if not paths:
        raise click.UsageError("report needs a run directory, a session directory or trace PATHs")
    out_mod.check_target(output, list(paths), out_mod.PAGE)
    console = says(output)  # the summary: on stderr when the output is stdout
    from expo_prof.abtest.from_pipeline import compare_recordings
    from expo_prof.pipeline import run

    opts = options(op, source, max_bytes, jobs, ray, events=False)
    # The A/B section is compare's result on the same runs (the pipeline's per-run mechanism included).
    result = run(list(paths), opts)
    doc = report_document(list(paths), title=title, compare=compare_recordings(result), result=result)
    from expo_prof.verify.html_section import add_to_page, find, verdict_line

    verified = find(list(paths))  # a verify.json beside the runs adds its section (docs/verify.md)
    assert isinstance(doc.text, str)  # a page (only an export is bytes)
    n = out_mod.write(output, add_to_page(doc.text, verified))
    show_notes(settings, doc.warnings, doc.info)
    p = doc.payload
    ab = " with the A/B section of `expo-prof compare`" if p["ab"] else ""
    k = len(p["recordings"])
    console.print(f"report: {escape(str(output))} ({n / 1e6:.1f} MB; {k} recording{'' if k == 1 else 's'}{ab})")
    for line in doc.headlines:
        console.print(escape(line))
    if p["ab"]:
        # The off and on runs measured the saving across launches: say so beside the per-recording lines.
        console.print(escape(f"A/B (off vs on runs): {p['ab']['verdict']['statement']}"))
        rec = p["ab"]["mechanism"].get("reconcile")
        if rec:  # the per-run critical path fell while the A/B got slower: the figures that make both true
            console.print(escape(f"A/B (off vs on runs): {rec}"))
    for _path, v in verified:
        console.print(escape(f"verify: {verdict_line(v)}"))
    return 0

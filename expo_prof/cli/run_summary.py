"""What ``record``, ``demo`` and ``ab`` do after each run: the pipeline's analysis and the timeline page.

Lives on the CLI side so that ``record`` (launching, loading, run directories)
never imports the page builders: record → pipeline, runs; cli → everything.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from expo_prof.console import console, err_console
from expo_prof.errors import ExpoProfError


def after_run(quiet: bool, closing: Callable[[object], None] | None = None):
    """A callback for :func:`expo_prof.record.session.record_session`: analysis.json, tables, timeline.html.

    ``closing(result)`` (the pipeline Result) is called last, after the timeline line: ``demo`` ends with
    its answer there.
    """

    def done(run_dir: Path) -> None:
        result = summarize(run_dir, quiet=quiet)
        if result is None:
            return
        page = write_timeline(run_dir)
        if not quiet and page is not None:
            console.print(f"  timeline      {page}")
        if closing is not None:
            closing(result)

    return done


def summarize(run_dir: Path, *, quiet: bool = False) -> object | None:
    """Analyse the run through the pipeline and save ``analysis.json`` next to it; returns the pipeline
    Result (None when the run traced nothing or the analysis failed, said in one line)."""
    from expo_prof.pipeline import run
    from expo_prof.terminal import JsonReporter, TableReporter

    if not any(p.is_file() for sub in ("overlay", "profiler", "msprof") for p in (run_dir / sub).rglob("*")):
        # Overlay off and no profiler: nothing was traced, so there is nothing to analyse.
        if not quiet:
            console.print("  analysis      none: this run has no overlay log and no profiler trace")
        return None
    import io

    from expo_prof import output as out_mod

    try:
        result = run([run_dir])
        buf = io.StringIO()
        JsonReporter().render(result.document, file=buf)
        out_mod.write(run_dir / "analysis.json", buf.getvalue())  # never half a file (a full disk: one line)
    except ExpoProfError as exc:
        err_console.print(f"[yellow]analysis:[/] {exc}")
        return None
    if not quiet:
        # The warnings `analyze RUN` would print (one per run for a missing summary line), before the tables.
        from expo_prof.console import safe, warn

        for w in result.warnings:
            warn(safe(w))
        TableReporter(top=5).render(result.document)
        console.print(f"  analysis      {run_dir / 'analysis.json'}")
    return result


def write_timeline(run_dir: Path) -> Path | None:
    """``timeline.html`` of the run (as ``expo-prof timeline RUN`` writes it); None when it cannot be drawn."""
    from expo_prof import output as out_mod
    from expo_prof.html.build import timeline_document

    target = run_dir / "timeline.html"
    try:
        doc = timeline_document([run_dir])
        out_mod.write(target, doc.text)
    except ExpoProfError as exc:
        err_console.print(f"[yellow]timeline:[/] {exc}")
        return None
    return target

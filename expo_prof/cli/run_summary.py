"""What ``record``, ``demo`` and ``ab`` do after each run: the pipeline's analysis and the timeline page.

Lives on the CLI side so that ``record`` (launching, loading, run directories)
never imports the page builders: record → pipeline, runs; cli → everything.

Only a run that ended ``ok`` is summarised: a run whose engine died, or that lost too many requests, raises
before (expo_prof/record/runner.py), so no saving and no verdict is ever printed from it; :func:`after_run`
checks the manifest's status too. An output of the summary that cannot be written (a full disk: the page is a
few MB) is one line at the end, exit 2, and the run's manifest then says ``incomplete`` and names it
(``unwritten``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from expo_prof.console import console, err_console
from expo_prof.errors import BadInput, ExpoProfError

#: What the one line of a write that failed says (expo_prof/output.py): ``-o PATH: cannot write (WHY)``.
_CANNOT = re.compile(r"cannot write \((.*)\)$")


def after_run(quiet: bool, closing: Callable[[object], None] | None = None):
    """A callback for :func:`expo_prof.record.session.record_session`: analysis.json, tables, timeline.html.

    ``closing(result)`` (the pipeline Result) is called last, after the timeline line: ``demo`` ends with
    its answer there. Outputs that cannot be written: one line (BadInput, exit 2) once the rest is done.
    """

    def done(run_dir: Path) -> None:
        status = _status(run_dir)
        if status not in (None, "ok"):
            # Never reached from record_session (a run that did not end ok raises first): said, not summarised.
            if not quiet:
                console.print(f"  analysis      none: the run ended {status!r}; no saving or verdict from it")
            return
        unwritten: dict[str, str] = {}
        result = summarize(run_dir, quiet=quiet, unwritten=unwritten)
        if result is not None:
            page = write_timeline(run_dir, unwritten=unwritten)
            if not quiet and page is not None:
                console.print(f"  timeline      {page}")
            if closing is not None:
                closing(result)
        if unwritten:
            raise BadInput(_mark_incomplete(run_dir, unwritten))

    return done


def _status(run_dir: Path) -> str | None:
    from expo_prof.runs.manifest import read_manifest

    try:
        return read_manifest(run_dir).status
    except BadInput:
        return None


def _mark_incomplete(run_dir: Path, unwritten: dict[str, str]) -> str:
    """Say in the run's manifest (status ``incomplete``, ``unwritten``, a note) which outputs are missing; returns
    the one line for them."""
    from expo_prof.runs.manifest import write_manifest

    names = ", ".join(sorted(unwritten))
    whys = "; ".join(dict.fromkeys(unwritten.values()))
    again = (f"; once there is room: expo-prof timeline {run_dir} -o {run_dir / 'timeline.html'}"
             if "timeline.html" in unwritten else "")
    line = f"-o {run_dir}: cannot write {names} ({whys})"
    try:
        raw = json.loads((run_dir / "manifest.json").read_text())
        raw["status"] = "incomplete"
        raw["unwritten"] = {**(raw.get("unwritten") or {}), **unwritten}
        raw.setdefault("notes", []).append(f"not written: {names} ({whys}): the recording is kept{again}")
        write_manifest(run_dir, raw)
    except (OSError, ValueError, AttributeError):
        try:
            (run_dir / "manifest.json.tmp").unlink(missing_ok=True)  # layout.write_json's temporary file
        except OSError:
            pass
        return f"{line}; its manifest.json could not be updated either{again}"
    return f"{line}; the run is kept, its manifest says 'incomplete'{again}"


def _unwritten(exc: BadInput) -> str:
    m = _CANNOT.search(str(exc))
    return m.group(1) if m else str(exc)


def summarize(run_dir: Path, *, quiet: bool = False, unwritten: dict[str, str] | None = None) -> object | None:
    """Analyse the run through the pipeline and save ``analysis.json`` next to it; returns the pipeline
    Result (None when the run traced nothing or the analysis failed, said in one line). ``unwritten``: where an
    ``analysis.json`` that cannot be written is named (with why) instead of said here."""
    from expo_prof.pipeline import run
    from expo_prof.terminal import JsonReporter, TableReporter

    if not any(p.is_file() for sub in ("overlay", "profiler", "msprof") for p in (run_dir / sub).rglob("*")):
        # Overlay off and no profiler: nothing was traced, so there is nothing to analyse.
        if not quiet:
            console.print("  analysis      none: this run has no overlay log and no profiler trace")
        return None
    from expo_prof import output as out_mod

    try:
        result = run([run_dir])
        doc = list(JsonReporter().chunks(result.document))  # bytes: no str copy of the document
    except ExpoProfError as exc:
        err_console.print(f"[yellow]analysis:[/] {exc}")
        return None
    written = True
    try:
        out_mod.write_chunks(run_dir / "analysis.json", doc)  # never half a file (a full disk: one line)
    except BadInput as exc:
        if unwritten is None:
            err_console.print(f"[yellow]analysis:[/] {exc}")
            return None
        unwritten["analysis.json"] = _unwritten(exc)
        written = False
    if not quiet:
        # The warnings `analyze RUN` would print (one per run for a missing summary line), before the tables.
        from expo_prof.console import safe, warn

        for w in result.warnings:
            warn(safe(w))
        TableReporter(top=5).render(result.document)
        if written:
            console.print(f"  analysis      {run_dir / 'analysis.json'}")
    return result


def write_timeline(run_dir: Path, *, unwritten: dict[str, str] | None = None) -> Path | None:
    """``timeline.html`` of the run (as ``expo-prof timeline RUN`` writes it); None when it cannot be drawn or
    written (``unwritten``: where a page that cannot be written is named, with why, instead of said here)."""
    from expo_prof import output as out_mod
    from expo_prof.html.build import timeline_document

    target = run_dir / "timeline.html"
    try:
        doc = timeline_document([run_dir])
    except ExpoProfError as exc:
        err_console.print(f"[yellow]timeline:[/] {exc}")
        return None
    try:
        out_mod.write(target, doc.text)
    except BadInput as exc:
        if unwritten is None:
            err_console.print(f"[yellow]timeline:[/] {exc}")
        else:
            unwritten["timeline.html"] = _unwritten(exc)
        return None
    return target

"""From command inputs to finished documents: read, analyse, lay out, render.

The CLI commands (``timeline``, ``report``, ``export``) are thin wrappers
around these functions; tests and the benchmark call them directly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from expo_prof.errors import BadInput, ExpoProfError, NothingFound
from expo_prof.html import inputs as inp
from expo_prof.html import lod


@dataclass
class Document:
    """A rendered page (or export) plus what the command reports about it."""

    text: str | bytes
    payload: dict
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def compile_op(op: str | None) -> re.Pattern | None:
    if op is None:
        return None
    try:
        return re.compile(op)
    except re.error as exc:
        raise BadInput(f"--op {op!r} is not a valid regular expression: {exc}") from None


def analyse_timelines(timelines, op: str | None):
    """Per-Timeline analyses (every source is drawn; ``analyze`` would pick one per rank)."""
    from expo_prof.analysis.hidden import analyze_timeline

    pattern = compile_op(op)
    return [analyze_timeline(tl, pattern) for tl in timelines]


def _skipped_lines(loaded) -> list[str]:
    return [f"skipped {p}: {why}" for p, why in loaded.skipped]


def timeline_document(
    paths: Sequence[Path],
    *,
    op: str | None = None,
    max_bytes: int | None = None,
    title: str | None = None,
    detail_budget: int = lod.DETAIL_BUDGET,
    busy_budget: int = lod.BUSY_BUDGET,
) -> Document:
    """The timeline page of one run (or of plain traces)."""
    from expo_prof.html import timeline_data, timeline_page

    runs = inp.resolve(list(paths), allow_session=False)
    if len(runs) > 1:
        raise BadInput("timeline draws one run: pass one run directory (or trace files of one run)")
    run = runs[0]
    loaded = inp.load_run(run, max_bytes)
    analyses = analyse_timelines(loaded.timelines, op)
    warnings = list(loaded.warnings) + _skipped_lines(loaded)
    notes = []
    n_inst = sum(len(a) for a in analyses)
    if n_inst == 0:
        from expo_prof.analysis.targets import LOOKED_FOR

        looked = f"--op {op!r}" if op else "; ".join(LOOKED_FOR)
        msg = f"no target instance found (looked for {looked}); the page shows the trace only"
        warnings.append(msg)
        notes.append(msg)
    meta = {"label": run.label, "path": str(run.path), "overlay": run.overlay}
    name = title or f"expo-prof timeline — {run.label}"
    payload = timeline_data.build_payload(
        analyses, title=name, detail_budget=detail_budget, busy_budget=busy_budget, warnings=warnings, run=meta
    )
    return Document(timeline_page.render(payload), payload, warnings, notes)


def report_document(
    paths: Sequence[Path],
    *,
    op: str | None = None,
    max_bytes: int | None = None,
    title: str | None = None,
    compare: Any = None,
) -> Document:
    """The summary page of one or more runs (A/B section with overlay-off and -on runs)."""
    from expo_prof.analysis import analyze
    from expo_prof.html import report_data, report_page

    compile_op(op)
    runs = inp.resolve(list(paths))
    entries = []
    warnings: list[str] = []
    first_error: ExpoProfError | None = None
    for run in runs:
        result, error = None, None
        try:
            loaded = inp.load_run(run, max_bytes)
            result = analyze(
                loaded.timelines, op=op, inputs=[str(p) for p in run.trace_paths],
                warnings=loaded.warnings, skipped=loaded.skipped,
            )
            warnings.extend(f"{run.label}: {w}" for w in result.warnings)
        except (BadInput, NothingFound) as exc:
            error = str(exc)
            first_error = first_error or exc
            warnings.append(f"{run.label}: {error}")
        entries.append(report_data.run_entry(run.label, str(run.path), run.overlay, run.manifest, result, error))
    if first_error is not None and not any(e["analysis"] or e["metrics"] for e in entries):
        raise first_error
    label = entries[0]["label"] if len(entries) == 1 else f"{len(entries)} runs"
    payload = report_data.build_payload(entries, title=title or f"expo-prof report — {label}", warnings=warnings, compare=compare)
    return Document(report_page.render(payload), payload, warnings)


def export_document(paths: Sequence[Path], *, op: str | None = None, max_bytes: int | None = None) -> Document:
    """The annotated Chrome trace of one run."""
    from expo_prof.html import chrome_export

    runs = inp.resolve(list(paths), allow_session=False)
    if len(runs) > 1:
        raise BadInput("export writes one run: pass one run directory (or trace files of one run)")
    loaded = inp.load_run(runs[0], max_bytes)
    analyses = analyse_timelines(loaded.timelines, op)
    data, stats = chrome_export.export(analyses)
    warnings = list(loaded.warnings) + _skipped_lines(loaded)
    if stats["instances"] == 0:
        warnings.append("no target instance found: the export holds the trace and its steps only")
    return Document(data, stats, warnings)

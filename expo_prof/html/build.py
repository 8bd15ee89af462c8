"""From command inputs to finished documents: the pipeline's Result, laid out and rendered.

The CLI commands (``timeline``, ``report``, ``export``) are thin wrappers
around these functions; tests and the benchmark call them directly. Nothing
here reads a trace: :func:`expo_prof.pipeline.run` does, once, for every
command, so a page counts exactly what ``analyze`` counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from expo_prof.errors import BadInput
from expo_prof.html import lod
from expo_prof.pipeline import Options, RecordingResult, Result, run


@dataclass
class Document:
    """A rendered page (or export) plus what the command reports about it."""

    text: str | bytes
    payload: dict
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The pipeline's one-line headline per recording shown (the same line `analyze` prints).
    headlines: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)


def _options(op: str | None, max_bytes: int | None, source: str, options: Options | None) -> Options:
    return options if options is not None else Options.make(op=op, source=source, max_bytes=max_bytes)


def one_recording(result: Result, what: str) -> RecordingResult:
    """The single recording a timeline or export is drawn from (BadInput naming them when there are several)."""
    found = result.found
    if len(result.recordings) > 1:
        names = ", ".join(r.label for r in result.recordings[:4])
        more = f" (+{len(result.recordings) - 4} more)" if len(result.recordings) > 4 else ""
        raise BadInput(f"{what} draws one recording; the inputs hold {len(result.recordings)}: {names}{more}; "
                       "pass one of them")
    return found[0]


def timeline_document(
    paths: Sequence[Path],
    *,
    op: str | None = None,
    max_bytes: int | None = None,
    source: str = "auto",
    options: Options | None = None,
    title: str | None = None,
    detail_budget: int = lod.DETAIL_BUDGET,
    busy_budget: int = lod.BUSY_BUDGET,
) -> Document:
    """The timeline page of one recording."""
    from expo_prof.html import timeline_data, timeline_page

    result = run(list(paths), _options(op, max_bytes, source, options))
    rr = one_recording(result, "timeline")
    rec = rr.recording
    meta = {"label": rec.label, "path": rec.path, "overlay": rec.overlay, "headline": rr.headline,
            "saving_line": rr.saving_line, "target": result.options.op}
    name = title or f"expo-prof timeline — {Path(rec.label).name or rec.label}"
    payload = timeline_data.build_payload(
        rr.parts, title=name, detail_budget=detail_budget, busy_budget=busy_budget, warnings=result.warnings, run=meta,
        timelines=rr.timelines,  # the overlay log read beside a profiler trace: its switchback phases
    )
    return Document(timeline_page.render(payload), payload, list(payload["warnings"]), [], rr.lines, result.info)


def report_document(
    paths: Sequence[Path],
    *,
    op: str | None = None,
    max_bytes: int | None = None,
    source: str = "auto",
    options: Options | None = None,
    title: str | None = None,
    compare: Any = None,
    result: Result | None = None,
) -> Document:
    """The summary page of one or more recordings; ``compare`` (``expo-prof compare``'s result on the same runs,
    :func:`expo_prof.abtest.from_pipeline.compare_recordings`) becomes the A/B section."""
    from expo_prof.html import report_data, report_page

    if result is None:
        result = run(list(paths), _options(op, max_bytes, source, options))
    entries = []
    for rr in result.recordings:
        rec = rr.recording
        manifest = rec.manifest.raw if rec.manifest is not None else None
        entries.append(report_data.run_entry(rec.label, rec.path, rec.overlay, manifest, rr.analysis, rr.error,
                                             op=result.options.op, saving_line=rr.saving_line, saving=rr.savings,
                                             natural=rr.natural, timelines=rr.timelines))
    label = Path(entries[0]["label"]).name if len(entries) == 1 else f"{len(entries)} recordings"
    payload = report_data.build_payload(entries, title=title or f"expo-prof report — {label}",
                                        warnings=result.warnings, compare=compare, op=result.options.op)
    return Document(report_page.render(payload), payload, list(payload["warnings"]), [],
                    [f"{rr.label}: {line}" if len(result.recordings) > 1 else line
                     for rr in result.recordings for line in rr.lines], result.info)

"""``expo-prof export``: one recording's traces with the analysis added as tracks.

Two formats: the Chrome Trace Event JSON (:mod:`.chrome`; the trace's own
events, flows, metadata and args passed through) and Perfetto's native
protobuf (:mod:`.perfetto`; TrackDescriptor / TrackEvent packets: the
traces' timed events, without args, metadata or counters, and a count of
what it leaves out). Both add the same tracks (:mod:`.tracks`). Like every
command, the figures come from :func:`expo_prof.pipeline.run`; only the
writers read a trace's bytes again, for what the Timeline does not keep
(:mod:`.raw_trace`, :mod:`.perfetto_carry`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from expo_prof.pipeline import Options, run
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED

#: ``--format`` values.
FORMATS = ("json", "perfetto")


@dataclass
class Export:
    """An export being written: its bytes (a stream: consume once), counts (complete after), and notes."""

    chunks: Iterator[bytes]
    stats: dict
    warnings: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)
    headline: str = ""
    #: The line under it: what the overlay saves, or that nothing measured it (RecordingResult.saving_line).
    saving_line: str = ""


def export_document(paths: Sequence[Path], *, fmt: str = "json", options: Options | None = None) -> Export:
    """The export of the one recording under ``paths`` (BadInput naming them when there are several)."""
    from expo_prof.html.build import one_recording

    opts = options or Options.make()
    result = run(list(paths), opts)
    rr = one_recording(result, "export")
    max_bytes = opts.max_bytes or DEFAULT_MAX_DECOMPRESSED
    if fmt == "perfetto":
        from expo_prof.export.perfetto import export_perfetto

        chunks, stats, warns = export_perfetto(rr, opts.op, max_bytes)
    else:
        from expo_prof.export.chrome import export_chrome

        chunks, stats, warns = export_chrome(rr, opts.op, max_bytes)
    warns[:0] = result.warnings  # the same list: warnings met while writing are shown too
    return Export(chunks, stats, warns, list(result.info), rr.headline, rr.saving_line)

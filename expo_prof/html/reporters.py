"""The report page as a :class:`~expo_prof.terminal.base.Reporter`, beside the table and JSON reporters.

``HtmlReporter().render(result, file)`` writes the report page of one
:class:`~expo_prof.analysis.model.AnalysisResult` (what ``analyze`` computed);
the manifest and the label of the run are optional extras. The timeline page
needs the Timelines themselves, not only the result: see
:func:`expo_prof.html.build.timeline_document`.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from expo_prof.analysis.model import AnalysisResult


class HtmlReporter:
    """Writes the self-contained report page (docs/html.md)."""

    def __init__(self, *, label: str = "run", manifest: dict | None = None, title: str | None = None, compare: Any = None) -> None:
        self.label = label
        self.manifest = manifest
        self.title = title
        self.compare = compare

    def render(self, result: AnalysisResult, file: IO[str] | None = None) -> None:
        from expo_prof.html import report_data, report_page

        overlay = (self.manifest or {}).get("overlay")
        entry = report_data.run_entry(self.label, ", ".join(result.inputs), overlay if overlay in ("on", "off") else None,
                                      self.manifest, result, None)
        payload = report_data.build_payload([entry], title=self.title or f"expo-prof report — {self.label}",
                                            warnings=list(result.warnings), compare=self.compare)
        out = file if file is not None else sys.stdout
        out.write(report_page.render(payload))
        out.flush()

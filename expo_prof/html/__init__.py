"""Self-contained HTML pages (timeline, report) (docs/html.md); the export is :mod:`expo_prof.export`.

* :mod:`expo_prof.html.build` — from command inputs to documents (what the CLI commands call);
* :mod:`expo_prof.html.timeline_data`, :mod:`~expo_prof.html.report_data` — the pages' data (column-wise, interned);
* :mod:`expo_prof.html.segments` — hidden/exposed sub-intervals of each instance;
* :mod:`expo_prof.html.lod` — level of detail for large traces;
* :mod:`expo_prof.html.assets`, :mod:`~expo_prof.html.escape` — one inline file, safely escaped;
* :mod:`expo_prof.html.reporters` — :class:`HtmlReporter`, the report page as a Reporter.

The browser that tests and benchmarks drive these pages with is ``tests/support/headless.py``.
"""

from expo_prof.html.reporters import HtmlReporter

__all__ = ["HtmlReporter"]

"""What ``analyze`` (and ``record``'s summary) prints on the terminal: rich tables, or the JSON document.

Named for where its output goes, not "report": that word belongs to the ``report`` command and its HTML
page (``expo_prof/html/report_*``). Each renders one :class:`~expo_prof.analysis.model.AnalysisResult`
through the :class:`Reporter` protocol (the report page implements it too, in
``expo_prof/html/reporters.py``); they share the result data model and know nothing of parsing or analysis.
"""

from expo_prof.terminal.base import Reporter
from expo_prof.terminal.json_reporter import JsonReporter
from expo_prof.terminal.tables import TableReporter

__all__ = ["JsonReporter", "Reporter", "TableReporter"]

"""Reporters: render one :class:`~expo_prof.analysis.model.AnalysisResult` (rich tables, JSON).

Every reporter implements :class:`Reporter`; they share the result data model
and know nothing of parsing or analysis.
"""

from expo_prof.report.base import Reporter
from expo_prof.report.json_reporter import JsonReporter
from expo_prof.report.tables import TableReporter

__all__ = ["JsonReporter", "Reporter", "TableReporter"]

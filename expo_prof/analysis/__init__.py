"""Pure analysis over Timelines: interval arithmetic, target recognition, hidden/exposed time, roll-ups."""

from expo_prof.analysis.rollup import analyze
from expo_prof.analysis.model import SCHEMA, AnalysisResult

__all__ = ["SCHEMA", "AnalysisResult", "analyze"]

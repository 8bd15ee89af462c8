"""The one pipeline every command calls: paths + :class:`Options` → :class:`Result` (see :mod:`.run`)."""

from expo_prof.analysis.saving import arrival  # the token-arrival rule, for compare's A/B flag (abtest reaches analysis here)
from expo_prof.analysis.rollup import SOURCES
from expo_prof.pipeline.options import Options, parse_size
from expo_prof.pipeline.result import RecordingResult, Result, headline
from expo_prof.pipeline.run import expand, run

__all__ = ["SOURCES", "arrival", "Options", "RecordingResult", "Result", "expand", "headline", "parse_size", "run"]

"""compare's result for the recordings of a pipeline Result: what the report's A/B section shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def compare_recordings(result: Any) -> Any:
    """``expo-prof compare``'s result on the run directories of a pipeline Result with overlay-off and -on
    runs (paired when they came from one session), or None without both sides."""
    from expo_prof.abtest.inputs.loader import load
    from expo_prof.abtest.judging.judge import compare
    from expo_prof.errors import ExpoProfError

    runs = [rr.recording for rr in result.recordings if rr.recording.manifest is not None]
    off = [r for r in runs if r.overlay == "off"]
    on = [r for r in runs if r.overlay == "on"]
    if not off or not on:
        return None
    sessions = {str(Path(r.path).parent) for r in runs}
    try:
        if len(sessions) == 1 and (Path(next(iter(sessions))) / "session.json").is_file():
            loaded = load([Path(next(iter(sessions)))], [])
        else:
            loaded = load([Path(r.path) for r in off], [Path(r.path) for r in on])
        return compare(loaded)
    except ExpoProfError:
        return None

"""Overlap figures read back from the overlay's JSONL event log, shared by the overlay benchmarks.

The figures go through expo-prof's own reader and analysis (the same pipeline
``expo-prof analyze`` runs), so a README figure and the tool's output can
never disagree; tests/bench/test_eventlog_stats.py checks them against
windows known by construction.
"""

from __future__ import annotations

from pathlib import Path


def overlap(a, b) -> int:
    """Length of the overlap of two ``[start, end]`` windows (0 when apart)."""
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def event_log_hidden(out_dir: str) -> tuple[float, float, int]:
    """Hidden fraction of the draws, mean sampler wait per draw (ms) and the number of draws, from the
    event logs the instrumented overlay wrote in ``out_dir``."""
    from expo_prof.analysis import analyze
    from expo_prof.readers import load

    loaded = load([Path(out_dir)])
    s = analyze(loaded.timelines).summary
    n = s.instances
    hidden = s.hidden_fraction if s.hidden_fraction is not None else float("nan")
    return hidden, (s.wait_ns / n / 1e6 if n else float("nan")), n

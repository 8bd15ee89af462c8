"""A switchback recording's inter-token gaps by arm: its run directory's ``workload.json`` placed on the wall clock
(the built-in load's requests, expo_prof/serving/load.py) against its event log's steps
(:mod:`expo_prof.analysis.saving.arrival`). Wiring for :func:`expo_prof.pipeline.run`: what the run directory holds, read
once; the arithmetic is the analysis module's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from expo_prof.analysis.saving import arrival
from expo_prof.analysis.model import SwitchbackArrival
from expo_prof.errors import BadInput
from expo_prof.runs.layout import inside
from expo_prof.runs.recordings import Recording


def seconds_of(x: Any) -> float | None:
    """A finite, non-negative time of a workload.json or a bench result (None for text, bool, null, NaN, a
    negative time): the one check of a gap or a start, shared with the A/B's gaps (abtest/inputs/gaps.py)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    v = float(x)
    return v if math.isfinite(v) and v >= 0.0 else None


def measured_arrivals(workload: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """Each inter-token gap of a built-in load's measured requests (``ok``, not the warm-up), with the wall-clock
    time (ns) its token arrived (:func:`~expo_prof.analysis.saving.arrival.arrivals`); None when no request can be
    placed on the wall clock. A request's start is its ``start_wall_ns``; in a workload.json older than that
    field, ``window_ns[0]`` + ``start_s``: the load samples ``window_ns[0]`` right after the clock its measured
    requests' ``start_s`` count from (expo_prof/serving/load.py, since window_ns exists). A workload.json of an
    interrupted run keeps no window, and one of a user's load command no requests: not measurable."""
    requests = workload.get("requests") if isinstance(workload, dict) else None
    if not isinstance(requests, list):
        return None
    window = workload.get("window_ns")
    t0 = window[0] if isinstance(window, list) and len(window) == 2 and isinstance(window[0], int) \
        and not isinstance(window[0], bool) else None
    starts: list[int] = []
    ttfts: list[float] = []
    itls: list[list[float]] = []
    for r in requests:
        if not isinstance(r, dict) or r.get("ok") is not True or r.get("warmup"):
            continue
        own, start_s, ttft, itl = r.get("start_wall_ns"), seconds_of(r.get("start_s")), seconds_of(r.get("ttft_s")), \
            r.get("itl_s")
        gaps = [seconds_of(g) for g in itl] if isinstance(itl, list) else []
        if ttft is None or not gaps or any(g is None for g in gaps):
            continue
        if isinstance(own, int) and not isinstance(own, bool) and own > 0:
            starts.append(own)
        elif t0 is not None and start_s is not None:
            starts.append(t0 + round(start_s * 1e9))
        else:
            continue
        ttfts.append(ttft)
        itls.append([g for g in gaps if g is not None])
    if not starts:
        return None
    return arrival.arrivals(starts, ttfts, itls)


def switchback_arrival_of(rec: Recording, tls: list) -> SwitchbackArrival | None:
    """A switchback recording's inter-token gaps by arm, from its run directory's workload.json and its lowest
    rank's event log (:mod:`expo_prof.analysis.saving.arrival`); None, silently, when not measurable (no switchback
    log, no run directory, no workload.json, no request placed on the wall clock)."""
    log = arrival.switchback_log(tls)
    if log is None or rec.manifest is None:
        return None
    try:
        path = inside(Path(rec.path), "workload.json", "workload.json")
        workload = json.loads(path.read_bytes()) if path.is_file() else None
    except (BadInput, OSError, ValueError):
        return None
    placed = measured_arrivals(workload)
    if placed is None:
        return None
    cols, wall_minus_mono_ns, arms = log
    return arrival.of_log(cols, wall_minus_mono_ns, placed[0], placed[1], arms)

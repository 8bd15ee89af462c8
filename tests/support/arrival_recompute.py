"""docs/ab.md's "Bursty tokens" for a switchback run, written out plainly: json, bisect and statistics, no expo_prof code.

A test compares expo-prof's ``runs[].arrival`` with :func:`recompute` over the same run directory's files: the
built-in load's ``workload.json`` (each measured request's tokens placed on the wall clock) and the overlay's event
log (each step's phase and its wall-clock window).
"""

from __future__ import annotations

import bisect
import json
import statistics
from pathlib import Path

NEAR_ZERO = 0.05  # of the arm's mean gap
SHARE_RISE = 0.25
SHAPE_CHANGE = 0.25
MIN_GAPS = 100


def placed_gaps(workload: dict) -> list[tuple[int, float]]:
    """(arrival wall ns, gap s) of every gap of the measured requests (``ok``, not the warm-up)."""
    t0 = (workload.get("window_ns") or [None])[0]
    out = []
    for r in workload["requests"]:
        if not r["ok"] or r["warmup"]:
            continue
        start = r.get("start_wall_ns")
        if start is None:
            if t0 is None:
                continue
            start = t0 + round(r["start_s"] * 1e9)
        t = r["ttft_s"]
        for g in r["itl_s"]:
            t += g
            out.append((start + round(t * 1e9), g))
    return out


def step_windows(log_lines: list[dict]) -> list[tuple[int, int, str | None, bool]]:
    """(start, end, phase, first of its block) per step line, on the wall clock: to the next step's t0 when the
    next line is the very next step and the engine did not wait (an idle gap: the host time after the step's own
    work above 10 × its median + 1 ms), else to the end of the step's own work."""
    head = log_lines[0]
    shift = head["wall_ns"] - head["mono_ns"]
    steps = [x for x in log_lines if x.get("type") == "step" and x.get("t0_ns") is not None]
    cad: dict[int, int] = {}
    for a, b in zip(steps, steps[1:]):
        if b["step"] == a["step"] + 1 and b["t0_ns"] >= a["t0_ns"]:
            cad[id(a)] = b["t0_ns"] - a["t0_ns"]
    after = {k: c - (s.get("host_end") or 0) for s in steps if (k := id(s)) in cad for c in [cad[k]]}
    limit = 10 * statistics.median(after.values()) + 1_000_000
    seen: set[int] = set()
    out = []
    for s in steps:
        first = s.get("block") is not None and s["block"] not in seen
        if s.get("block") is not None:
            seen.add(s["block"])
        start = s["t0_ns"] + shift
        own = s.get("host_end") or 0
        length = cad[id(s)] if id(s) in cad and after[id(s)] <= limit else own
        out.append((start, start + length, s.get("phase") if s.get("block") is not None else None, first))
    return out


def shape(gaps_s: list[float]) -> dict:
    ms = sorted(g * 1e3 for g in gaps_s)
    mean = statistics.fmean(ms)
    q = statistics.quantiles(ms, n=100, method="inclusive")  # numpy's linear percentiles
    return {"gaps": len(ms), "mean_ms": mean, "near_zero_share": sum(g < NEAR_ZERO * mean for g in ms) / len(ms),
            "p50_ms": statistics.median(ms), "p99_ms": q[98], "max_ms": ms[-1]}


def bursts(x: dict, y: dict) -> bool:
    """Whether ``x``'s tokens arrive in bursts against ``y``'s (either rule)."""
    return (x["near_zero_share"] - y["near_zero_share"] > SHARE_RISE
            or (x["p50_ms"] < (1 - SHAPE_CHANGE) * y["p50_ms"] and x["p99_ms"] > (1 + SHAPE_CHANGE) * y["p99_ms"]))


def recompute(workload_path: Path, log_path: Path) -> dict:
    """Per arm the shape of its gaps, the gaps left out (``outside``, ``washout``) and the two-arm flag."""
    workload = json.loads(workload_path.read_text())
    lines = [json.loads(x) for x in log_path.read_text().splitlines() if x.strip()]
    windows = sorted(step_windows(lines), key=lambda w: w[0])
    starts = [w[0] for w in windows]
    by_arm: dict[str, list[float]] = {}
    outside = washout = 0
    for at, g in placed_gaps(workload):
        i = bisect.bisect_right(starts, at) - 1
        if i < 0 or at >= windows[i][1] or windows[i][2] is None:
            outside += 1
        elif windows[i][3]:
            washout += 1
        else:
            by_arm.setdefault(windows[i][2], []).append(g)
    arms = {a: shape(g) for a, g in by_arm.items()}
    judged = all(a in arms and arms[a]["gaps"] >= MIN_GAPS for a in ("off", "on"))
    flag = None
    if judged:
        flag = "on" if bursts(arms["on"], arms["off"]) else "off" if bursts(arms["off"], arms["on"]) else ""
    return {"arms": arms, "outside": outside, "washout": washout, "measured": judged, "bursty": flag}

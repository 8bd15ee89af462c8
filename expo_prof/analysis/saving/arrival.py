"""How tokens reach the client: the shape of inter-token gaps, the burst rule, and a switchback run's gaps by arm.

**The rule** (docs/ab.md, "Bursty tokens"). A side's gaps have a mean, a share **near zero** (under
:data:`NEAR_ZERO_SHARE_OF_MEAN` of the mean gap) and a tail (p50, p99, max). Tokens **arrive in bursts** on a side
when, against the other side, its near-zero share is more than :data:`BURST_SHARE_RISE` higher, or its p50 more
than :data:`SHAPE_CHANGE` lower while its p99 is more than :data:`SHAPE_CHANGE` higher: several tokens reach the
client together after a longer wait, so the median gap falls without any token arriving sooner — a change in
how tokens arrive, not a speed-up. :mod:`expo_prof.abtest.judging.flags` applies it across A/B runs (through the
pipeline, the only way its layer reaches analysis); :func:`switchback_arrival` within one switchback run.

**A switchback run's gaps by arm.** Every request of a switchback run spans off and on blocks, but every gap
ends at a token's arrival, at a wall-clock time, and every step of the event log has a phase and a wall-clock
window (its ``t0`` to the next step's ``t0``, the step's cadence): each gap goes to the arm of the step running
when its token arrived. Left out, and counted: gaps whose token arrived in no switchback step (before the first,
after the last, in an idle gap of the engine) and — as the saving drops each block's first step (washout,
:mod:`expo_prof.analysis.saving.switchback`) — gaps that arrived in a block's first step: a token reaches the client
while the step after the one that produced it runs (in the committed samples, a median 0.2–0.5 ms into it), so
the first step of a block holds the previous block's last gap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from expo_prof.analysis.model import ArmGaps, BurstFlag, SwitchbackArrival
from expo_prof.analysis.saving.switchback import COMPARISONS, THREE_ARMS, TWO_ARMS
from expo_prof.analysis.steps.facts import cadence, ints
from expo_prof.words import fmt_ns
from expo_prof.timeline import overlay_log

#: A gap is **near zero** below this share of its side's mean gap: no decode step lies between the two tokens,
#: the second came with the first (read back to back from one network read, or sent in one chunk's wake). The
#: mean, not the median, is the reference: bursts leave the mean gap as it is (the same tokens over the same
#: decode time) but drive the median to zero, so a median-relative threshold would shrink with the very bursts
#: it must find. Relative, not absolute (e.g. 50 µs): it scales with the model and machine — a 32B model's
#: 30 ms step and a tiny CPU model's 5 ms step alike — and no decode step of one workload is 20× shorter than
#: its mean step (batch shapes move a step by far less).
NEAR_ZERO_SHARE_OF_MEAN = 0.05
#: The flag's first rule: one side's near-zero share exceeds the other's by more than this (0.25: 25 points, a
#: quarter of the tokens delivered in a burst — enough to move the median gap). Not less: ordinary runs of one
#: unchanged vLLM CPU server differ by ~10 points (the committed samples, traces/samples/: 10.1 % of the
#: tiny-cpu-off-on off run's gaps near zero, 0.0 % of its on run's; 11.5 % in tiny-cpu-sequential, 0.1 % in
#: tiny-cpu-switchback), with ITL p50 and mean still telling the speed; the case that asked for the flag had 87 %.
#: Only the difference counts: both sides share the client's own lag (a busy event loop reading two chunks at
#: once) and the server's coalescing of outputs under load.
BURST_SHARE_RISE = 0.25
#: The flag's second rule: one side's ITL p50 is more than this share below the other's while its p99 is more
#: than this share above it — the typical gap shorter, the long gaps longer: the shape of bursts, whatever the
#: near-zero share.
SHAPE_CHANGE = 0.25
#: Fewest gaps per side to judge (fewer: not measurable): with 100, a share's binomial standard error is at
#: most 5 points, a fifth of the rise the first rule needs.
MIN_GAPS = 100
#: The flag's words (the A/B outcome of the same name: expo_prof.abtest.model.BURSTS).
BURSTS = "tokens arrive in bursts"
#: What the flag means, in the same words wherever it is said.
NOT_A_SPEEDUP = "a change in how tokens arrive, not a speed-up"
#: ... and what it means for a switchback run's saving.
SWITCHBACK_MEANING = (f"{NOT_A_SPEEDUP}: several tokens reach the client together after a longer wait; the saving "
                      "is the steps' cadence, which bursts do not move")


class GapShape(Protocol):
    """What the rule reads of a side (:class:`ArmGaps`, the A/B side's ``ArrivalSide``)."""

    name: str
    near_zero_ms: float
    near_zero_share: float
    p50_ms: float
    p99_ms: float
    max_ms: float


def gap_shape(name: str, gaps_s: np.ndarray | Sequence[float]) -> ArmGaps:
    """The shape of ``gaps_s`` (seconds in, ms out; at least one gap): mean, near-zero share, p50, p99, max.

    Percentiles as ``vllm bench serve`` and the built-in load compute theirs (numpy's linear interpolation)."""
    g = np.asarray(gaps_s, dtype=np.float64) * 1e3
    mean = float(g.mean())
    near = NEAR_ZERO_SHARE_OF_MEAN * mean
    p50, p99 = float(np.percentile(g, 50)), float(np.percentile(g, 99))
    return ArmGaps(name=name, gaps=len(g), mean_ms=mean, near_zero_ms=near,
                   near_zero_share=float(np.count_nonzero(g < near)) / len(g), p50_ms=p50, p99_ms=p99,
                   max_ms=float(g.max()), tail_ratio=p99 / p50 if p50 > 0 else None)


def _ms(v: float) -> str:
    return fmt_ns(v * 1e6)


def burst_reasons(x: GapShape, y: GapShape, unit: str = "side") -> list[str]:
    """Why ``x``'s tokens arrive in bursts compared with ``y``'s ([] when they do not); ``unit``: what ``x`` and
    ``y`` are called (an A/B ``side``, a switchback ``arm``)."""
    reasons = []
    if x.near_zero_share - y.near_zero_share > BURST_SHARE_RISE:
        reasons.append(f"{100 * x.near_zero_share:.1f} % of the {x.name} {unit}'s gaps are near zero (under "
                       f"{100 * NEAR_ZERO_SHARE_OF_MEAN:g} % of its mean gap, {_ms(x.near_zero_ms)}) against "
                       f"{100 * y.near_zero_share:.1f} % of the {y.name} {unit}'s")
    if x.p50_ms < (1 - SHAPE_CHANGE) * y.p50_ms and x.p99_ms > (1 + SHAPE_CHANGE) * y.p99_ms:
        reasons.append(f"its ITL p50 is {_ms(x.p50_ms)} against {_ms(y.p50_ms)} while its p99 is {_ms(x.p99_ms)} "
                       f"against {_ms(y.p99_ms)} (its longest gap {_ms(x.max_ms)})")
    return reasons


# ------------------------------------------------------------------------------------ a switchback run, by arm

def arrivals(start_wall_ns: Sequence[int], ttft_s: Sequence[float],
             itl_s: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """Each gap's end on the wall clock (ns) and the gap (s), for requests started at ``start_wall_ns``: request
    ``i``'s ``k``-th gap ends at its first token (``ttft_s[i]``) plus its gaps up to the ``k``-th."""
    ends: list[np.ndarray] = []
    gaps: list[np.ndarray] = []
    for start, ttft, itl in zip(start_wall_ns, ttft_s, itl_s, strict=True):
        g = np.asarray(itl, dtype=np.float64)
        ends.append(int(start) + np.rint((float(ttft) + np.cumsum(g)) * 1e9).astype(np.int64))
        gaps.append(g)
    if not ends:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    return np.concatenate(ends), np.concatenate(gaps)


def step_windows(cols: Mapping[str, np.ndarray],
                 wall_minus_mono_ns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step line of an overlay log: its wall-clock window ``[start, end)`` (ns) and whether it is its block's
    first step. A step runs from its ``t0`` to the next step's (its cadence, when the next line is the very next
    step and no idle gap: :func:`~expo_prof.analysis.saving.switchback.cadence`); else to the end of its own work
    (``t0 + host_end``), or it has no window (``end == start``) when that is unknown."""
    t0, host_end, block = ints(cols["t0_ns"]), ints(cols["host_end_ns"]), ints(cols["block"])
    cad, idle = cadence(cols["step"], t0, host_end)
    start = t0 + int(wall_minus_mono_ns)
    own = np.where(host_end >= 0, host_end, 0)
    end = start + np.where((cad >= 0) & ~idle, cad, own)
    first = np.zeros(len(block), dtype=bool)
    seen: set[int] = set()
    for i in np.flatnonzero(block >= 0):
        if int(block[i]) not in seen:  # the first line of each block, as the saving's washout
            seen.add(int(block[i]))
            first[i] = True
    return start, end, first


def attribute(arrival_ns: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """The step running when each token arrived: an index into the steps, or -1 where none ran (windows are
    ``[start, end)``, so a token arriving at the very ``t0`` of a step is that step's)."""
    a = ints(arrival_ns)
    start, end = ints(start_ns), ints(end_ns)
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    i = np.searchsorted(s, a, side="right") - 1
    j = np.clip(i, 0, None)
    inside = (i >= 0) & (a < e[j]) if len(s) else np.zeros(len(a), dtype=bool)
    return np.where(inside, order[j] if len(s) else -1, -1)


def switchback_arrival(arrival_ns: np.ndarray, gaps_s: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray,
                       phase: np.ndarray, first_of_block: np.ndarray,
                       arms: tuple[str, ...] = TWO_ARMS) -> SwitchbackArrival:
    """A switchback run's gaps by arm, and the burst rule over each comparison of ``arms``
    (:data:`~expo_prof.analysis.saving.switchback.COMPARISONS`: the arm looked at first, then its baseline).

    ``arrival_ns`` / ``gaps_s``: each gap's end on the wall clock and the gap (:func:`arrivals`); ``start_ns``,
    ``end_ns``, ``phase``, ``first_of_block``: per step (:func:`step_windows`; ``phase`` None or an arm not in
    ``arms``: no switchback step)."""
    gaps = np.asarray(gaps_s, dtype=np.float64)
    at = attribute(arrival_ns, start_ns, end_ns)
    ph, first = np.asarray(phase, dtype=object), np.asarray(first_of_block, dtype=bool)
    # Each gap's arm (an index into ``arms``; -1: its token arrived in no switchback step).
    step_arm = np.array([arms.index(p) if p in arms else -1 for p in ph.tolist()], dtype=np.int64)
    arm_of = np.where(at >= 0, step_arm[np.clip(at, 0, None)] if len(ph) else -1, -1)
    washed = (arm_of >= 0) & first[np.clip(at, 0, None)] if len(ph) else np.zeros(len(at), dtype=bool)
    kept = (arm_of >= 0) & ~washed
    shapes = {a: gap_shape(a, gaps[kept & (arm_of == k)]) for k, a in enumerate(arms) if np.any(kept & (arm_of == k))}
    flags: list[BurstFlag] = []
    judged: list[tuple[str, str]] = []
    for base, arm in COMPARISONS.get(arms, [arms[:2]]):
        x0, y0 = shapes.get(arm), shapes.get(base)
        if x0 is None or y0 is None or min(x0.gaps, y0.gaps) < MIN_GAPS:
            continue
        judged.append((base, arm))
        for x, y in ((x0, y0), (y0, x0)):
            reasons = burst_reasons(x, y, unit="arm")
            if reasons:
                flags.append(BurstFlag(arm=x.name, against=y.name, reasons=reasons))
                break
    if not judged:
        short = [a for a in arms if a not in shapes or shapes[a].gaps < MIN_GAPS]
        statement = (f"not measurable: fewer than {MIN_GAPS} inter-token gaps in the {' and '.join(short)} "
                     f"blocks")
    elif flags:
        statement = "; ".join(f"{BURSTS} in the {f.arm} blocks: " + "; ".join(f.reasons) for f in flags) + (
            f" — {SWITCHBACK_MEANING}")
    else:
        statement = "tokens arrive alike: " + "; ".join(
            f"near-zero gaps {100 * shapes[b].near_zero_share:.1f} % ({b}) vs {100 * shapes[a].near_zero_share:.1f} % "
            f"({a}), ITL p50 {_ms(shapes[b].p50_ms)} vs {_ms(shapes[a].p50_ms)}, p99 {_ms(shapes[b].p99_ms)} vs "
            f"{_ms(shapes[a].p99_ms)}" for b, a in judged)
    return SwitchbackArrival(
        measured=bool(judged), arms=[shapes[a] for a in arms if a in shapes],
        outside=int(np.count_nonzero(arm_of < 0)), washout=int(washed.sum()),
        bursts=bool(flags) if judged else None, flags=flags, statement=statement,
        near_zero_share_of_mean=NEAR_ZERO_SHARE_OF_MEAN, share_rise=BURST_SHARE_RISE, shape_change=SHAPE_CHANGE,
        min_gaps=MIN_GAPS)


def of_log(cols: Mapping[str, np.ndarray], wall_minus_mono_ns: int, arrival_ns: np.ndarray, gaps_s: np.ndarray,
           arms: tuple[str, ...] = TWO_ARMS) -> SwitchbackArrival:
    """:func:`switchback_arrival` over one overlay log's step columns (``OverlayLog.steps``)."""
    start, end, first = step_windows(cols, wall_minus_mono_ns)
    phase = np.asarray(cols["phase"], dtype=object).copy()
    phase[ints(cols["block"]) < 0] = None  # not a switchback step
    return switchback_arrival(arrival_ns, gaps_s, start, end, phase, first, arms)


def switchback_log(timelines) -> tuple[Mapping[str, np.ndarray], int, tuple[str, ...]] | None:
    """The lowest rank's overlay event log in switchback mode among ``timelines`` (its step columns, its
    wall-minus-monotonic clock offset and its arms), or None: no such log, or one without the clock pair that
    places its steps on the wall clock. The ranks of one job run the same blocks in lockstep; the client's
    tokens are the job's, so one log's phases say which arm each arrival fell in."""
    for tl in sorted(timelines, key=lambda t: t.rank):
        ov = overlay_log(tl)
        if ov is None or not ov.steps or ov.wall_minus_mono_ns is None:
            continue
        cols, block = ov.steps, ov.header_int("block_steps")
        if block is None or block < 2 or not np.any(ints(cols["block"]) >= 0):
            continue
        arms = THREE_ARMS if sorted(ov.arms or []) == sorted(THREE_ARMS) else TWO_ARMS
        return cols, ov.wall_minus_mono_ns, arms
    return None

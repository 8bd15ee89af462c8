"""``ab`` across launches that runs until its answer is settled: the switchback's rule over launch pairs.

``ab`` without ``--repeat`` launches off, on, off, on … and, after every on launch, looks at the output
tok/s change of each (off, on) pair, ``100 · (on / off − 1)``, in the order the pairs ran. The same
time-uniform confidence sequence as a sequential switchback (:mod:`expo_prof.analysis.saving.sequential`,
docs/ab.md "Sequential switchback") is put on those changes, so looking after every pair does not inflate the
error. The session stops at the first of:

* the sequence excludes 0: **enable** / **keep off**;
* it lies inside ±margin (``--margin``, a share of output tok/s, 1 % by default): **no effect beyond ±m**;
* the launch budget is spent (``--budget``: a number of launches, ``20 launches`` by default, or a time):
  **undecided**, with the interval so far and about how many more launch pairs would settle it.

No decision comes before :data:`~expo_prof.analysis.saving.sequential.MIN_PAIRS` pairs (12 launches): the sequence is
asymptotic, and a launch pair is the unit. ``--repeat N`` fixes the length instead (the fixed-horizon CI of
``compare`` is then the figure, as before).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from expo_prof.pipeline.live import MIN_PAIRS, launch_sequence
from expo_prof.record.settle import budget_seconds
from expo_prof.runs.manifest import read_manifest
from expo_prof.errors import BadInput
from expo_prof.words import UNDECIDED, plural

#: Default launch budget (launches, both sides together), and where the sequence is tightest (pairs).
DEFAULT_LAUNCHES = 20
OPTIMAL_PAIRS = 10
#: The file of a sequential ab session that holds its sequence and why it stopped.
FILE = "launches.json"

_LAUNCHES = re.compile(r"^\s*(\d+)\s*launch(?:es)?\s*$", re.IGNORECASE)
_SHARE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


@dataclass(frozen=True)
class LaunchRule:
    """How a sequential ab decides: the margin (% of output tok/s) and its budget (launches, or seconds)."""

    margin_pct: float
    launches: int | None = None
    seconds: float | None = None

    def spent(self, launches: int, elapsed_s: float) -> bool:
        """Whether the budget leaves no room for another launch pair."""
        return (self.launches is not None and launches + 2 > self.launches) or (
            self.seconds is not None and elapsed_s >= self.seconds)

    def budget_words(self) -> str:
        return f"{self.launches} launches" if self.launches is not None else f"{self.seconds:g} s"


class LaunchSequence(msgspec.Struct, kw_only=True):
    """The confidence sequence on the launch pairs' output tok/s changes (%), and what it decides."""

    method: str
    alpha: float
    pairs: int
    #: Each pair's change, 100 · (on / off − 1), in the order they ran.
    changes_pct: list[float]
    mean_pct: float
    #: The sequence's bounds after the last pair (null before MIN_PAIRS pairs).
    lo_pct: float | None
    hi_pct: float | None
    margin_pct: float
    decision: str
    settled_at: int | None
    pairs_needed: int | None
    #: settled / budget / a run failed (null while running).
    stopped: str | None = None


def parse_rule(margin: str, budget: str | None) -> LaunchRule:
    """``--margin`` (a share: ``1%``) and ``--budget`` (``20 launches``, or a time: ``30m``) of ab across
    launches; BadInput for anything else."""
    m = _SHARE.match(margin)
    if m is None or not 0 < float(m[1]) < 100:
        raise BadInput(f"--margin {margin!r}: across launches the margin is a share of output tok/s, e.g. 1%")
    share = float(m[1])
    text = budget if budget is not None else f"{DEFAULT_LAUNCHES} launches"
    b = _LAUNCHES.match(text)
    if b is not None:
        n = int(b[1])
        if n < 2 * MIN_PAIRS:
            raise BadInput(f"--budget {text!r}: at least {2 * MIN_PAIRS} launches ({MIN_PAIRS} pairs, the fewest "
                           "that can decide); or --repeat N for a fixed number of pairs")
        return LaunchRule(margin_pct=share, launches=n)
    seconds = budget_seconds(text)
    if seconds is None:
        raise BadInput(f"--budget {text!r} is neither a number of launches (20 launches) nor a time (30m, 2h)")
    return LaunchRule(margin_pct=share, seconds=seconds)


def pair_changes(runs: list[tuple[bool, Path]]) -> list[float]:
    """The output tok/s change (%) of each (off, on) pair of ``runs`` (overlay on?, run directory) in the order
    they ran; a pair missing a side or a figure is left out."""
    out = []
    for i in range(0, len(runs) - 1, 2):
        (a_on, a), (b_on, b) = runs[i], runs[i + 1]
        if a_on or not b_on:
            continue
        off, on = _tokps(a), _tokps(b)
        if off and on is not None:
            out.append(100.0 * (on / off - 1.0))
    return out


def _tokps(run: Path) -> float | None:
    try:
        v = read_manifest(run).metrics.get("output_throughput")
    except BadInput:
        return None
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def look(changes: list[float], rule: LaunchRule) -> LaunchSequence:
    """The sequence after these pairs (the first settling look's decision, the bounds at the last pair)."""
    sq = launch_sequence(changes, rule.margin_pct, OPTIMAL_PAIRS)
    return LaunchSequence(method=sq.method, alpha=sq.alpha, pairs=sq.pairs, changes_pct=list(changes),
                          mean_pct=sq.mean_ns, lo_pct=sq.lo_ns, hi_pct=sq.hi_ns, margin_pct=rule.margin_pct,
                          decision=sq.decision, settled_at=sq.settled_at, pairs_needed=sq.pairs_needed)


def line(sq: LaunchSequence) -> str:
    """Where a sequential ab stands, or its answer: the decision first, then the change with its sequence."""
    if not sq.pairs:
        return "ab: no launch pair measured yet"
    head = f"{plural(sq.pairs, 'launch pair')}, output tok/s {sq.mean_pct:+.2f}%"
    if sq.lo_pct is None or sq.hi_pct is None:
        return f"ab: {head}; a decision needs {MIN_PAIRS}+ pairs (margin ±{sq.margin_pct:g}%)"
    cs = f"95% confidence sequence {sq.lo_pct:+.2f}% to {sq.hi_pct:+.2f}%, margin ±{sq.margin_pct:g}%"
    if sq.decision != UNDECIDED:
        return f"ab: {sq.decision} — {head} ({cs}), settled at pair {sq.settled_at}"
    more = f"; about {sq.pairs_needed} more launch pairs would settle it" if sq.pairs_needed else ""
    return f"ab: {UNDECIDED} — {head} ({cs}){more}"


class Settler:
    """The stop rule ``record_session`` asks after every run of a sequential ab (:func:`look` on the pairs)."""

    def __init__(self, top: Path, rule: LaunchRule, say: Callable[[str], None] | None = None) -> None:
        self.top, self.rule, self.t0 = top, rule, time.monotonic()
        self.last: LaunchSequence | None = None
        #: Where the line of each look goes (one plain line per pair: a launch prints pages between two looks).
        self.say = say

    def __call__(self, runs: list[tuple[bool, Path]]) -> str | None:
        """Why the session stops after ``runs`` (None: launch another pair); writes :data:`FILE` each pair."""
        if len(runs) % 2:
            return None
        sq = self.last = look(pair_changes(runs), self.rule)
        why = "settled" if sq.decision != UNDECIDED else (
            "budget" if self.rule.spent(len(runs), time.monotonic() - self.t0) else None)
        sq.stopped = why
        (self.top / FILE).write_bytes(msgspec.json.format(msgspec.json.encode(sq)) + b"\n")
        if self.say is not None and why is None:
            used = f"{len(runs)} of {self.rule.budget_words()}" if self.rule.launches is not None else \
                f"{time.monotonic() - self.t0:.0f} s of {self.rule.budget_words()}"
            self.say(f"{line(sq)} ({used})")
        return why

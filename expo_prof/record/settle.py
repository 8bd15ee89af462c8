"""A switchback that runs until its answer is settled: looks at the overlay's event logs while the load runs.

``record --overlay switchback`` (and ``ab --switchback``, ``demo``) keep the load going and, every
:data:`LOOK_S` seconds, read what the overlay has written so far, compute the per-pair savings of the measured
load exactly as the analysis after the run does (:func:`expo_prof.analysis.saving.recording.savings_of`) and the
confidence sequence on them (:mod:`expo_prof.analysis.saving.sequential`). The load stops — between requests, never
mid-request — when the sequence settles (enable / keep off / no effect beyond the margin) or the budget (a
time, or a number of steps) runs out. Looking after every pair is what the confidence sequence is built for:
the error stays at its level however often it is looked at.

The looks themselves go through the pipeline (:mod:`expo_prof.pipeline.live`); this module holds the
run's rules: its budget, its margin, when to stop, and the line that shows where it stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from expo_prof.errors import BadInput
from expo_prof.pipeline.live import Look, SequentialSpec
from expo_prof.words import UNDECIDED, fmt_ns, plural

__all__ = ["Budget", "Look", "SequentialSpec", "budget_seconds", "load_ended_line", "manifest_entry", "parse_budget", "parse_margin",
           "progress_line"]

#: Seconds between two looks at the event logs.
LOOK_S = 2.0
#: Seconds of load with no switchback step in the logs after which the run stops (the overlay stepped aside).
NO_STEPS_S = 60.0
#: Default budgets: ``record`` / ``ab --switchback`` and the demo (minutes of load).
DEFAULT_BUDGET = "10m"
DEMO_BUDGET = "3m"

_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$", re.IGNORECASE)
_STEPS = re.compile(r"^\s*(\d+)\s*steps?\s*$", re.IGNORECASE)
_SHARE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)\s*$", re.IGNORECASE)
_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


@dataclass(frozen=True)
class Budget:
    """How long a sequential switchback may run: seconds of load, or steps of the measured load."""

    seconds: float | None = None
    steps: int | None = None

    def spent(self, elapsed_s: float, steps: int) -> bool:
        """Whether the budget has run out after ``elapsed_s`` seconds of load and ``steps`` steps."""
        return (self.seconds is not None and elapsed_s >= self.seconds) or (
            self.steps is not None and steps >= self.steps)

    def words(self) -> str:
        return f"{self.seconds:g} s of load" if self.seconds is not None else f"{self.steps} steps"

    def to_json(self) -> dict:
        return {"seconds": self.seconds, "steps": self.steps}


def parse_budget(text: str) -> Budget:
    """``--budget``: a time (``180``, ``90s``, ``3m``, ``1h``) or a number of steps (``5000 steps``)."""
    m = _STEPS.match(text)
    if m:
        n = int(m[1])
        if n < 1:
            raise BadInput(f"--budget {text!r}: at least 1 step")
        return Budget(steps=n)
    seconds = budget_seconds(text)
    if seconds is None:
        raise BadInput(f"--budget {text!r} is neither a time (90s, 3m, 1h) nor a number of steps (5000 steps)")
    return Budget(seconds=seconds)


def budget_seconds(text: str) -> float | None:
    """A ``--budget`` time (``180``, ``90s``, ``3m``, ``1h``) in seconds; None when ``text`` is no time; BadInput
    for a time of 0 (shared by the switchback's budget and ab's launch budget)."""
    m = _TIME.match(text)
    if m is None:
        return None
    seconds = float(m[1]) * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[(m[2] or "s").lower()]
    if seconds <= 0:
        raise BadInput(f"--budget {text!r} must be more than 0 s")
    return seconds


def parse_margin(text: str) -> SequentialSpec:
    """``--margin``: a share of the baseline's step cadence (``1%``) or a time per step (``20us``, ``0.05ms``)."""
    m = _SHARE.match(text)
    if m:
        share = float(m[1]) / 100.0
        if not 0 < share < 1:
            raise BadInput(f"--margin {text!r} must be between 0 and 100 %")
        return SequentialSpec(margin_share=share)
    m = _SPAN.match(text)
    if m is None:
        raise BadInput(f"--margin {text!r} is neither a share of the step (1%) nor a time per step (20us, 0.05ms)")
    ns = float(m[1]) * _NS[m[2].lower()]
    if ns <= 0:
        raise BadInput(f"--margin {text!r} must be more than 0")
    return SequentialSpec(margin_ns=ns)


def manifest_entry(spec: SequentialSpec, budget: Budget) -> dict:
    """The manifest's ``switchback`` object of a sequential run (what the analysis after it reads)."""
    return {"sequential": True, "margin_ns": spec.margin_ns, "margin_share": spec.margin_share,
            "alpha": spec.alpha, "optimal_pairs": spec.optimal_pairs, "budget": budget.to_json(), "stopped": None}


def progress_line(look: Look, elapsed_s: float, budget: Budget) -> str:
    """One line of where the run stands: pairs, the saving so far with its sequence, the margin, what is left."""
    sv = look.saving
    spent = f"{elapsed_s:.0f} s of {budget.words()}" if budget.seconds is not None else \
        f"{look.steps} of {budget.words()}"
    if sv is None or sv.sequence is None:
        return f"switchback: waiting for block pairs ({spent})"
    sq = sv.sequence
    head = f"switchback: {plural(sq.pairs, 'block pair')}, saving {fmt_ns(sq.mean_ns, signed=True)}/step"
    if sq.lo_ns is None or sq.hi_ns is None:
        return f"{head}, a sequence from {sq.pairs}+ pairs on ({spent})"
    line = (f"{head} (95% CS {fmt_ns(sq.lo_ns, signed=True)} to {fmt_ns(sq.hi_ns, signed=True)}), "
            f"margin ±{fmt_ns(sq.margin_ns)}")
    if sq.decision != UNDECIDED:
        return f"{line}: {sq.decision} ({spent})"
    more = f", ~{sv.steps_needed} more steps to decide" if sv.steps_needed else ""
    return f"{line}{more} ({spent})"


def load_ended_line(look: Look) -> str:
    """The one line for a load that ended before the switchback settled: where it stood, what it still needs."""
    sv = look.saving
    sq = sv.sequence if sv is not None else None
    if sv is None or sq is None:
        return ("switchback: the load ended before any block pair could be compared; a longer load (or the "
                "built-in one) would measure it")
    where = f"{plural(sq.pairs, 'block pair')}, saving {fmt_ns(sq.mean_ns, signed=True)}/step"
    if sq.lo_ns is not None and sq.hi_ns is not None:
        where += f" (95% CS {fmt_ns(sq.lo_ns, signed=True)} to {fmt_ns(sq.hi_ns, signed=True)})"
    more = (f"about {sv.steps_needed} more steps would settle it" if sv.steps_needed
            else "more steps would settle it")
    return f"switchback: the load ended before it settled — {where}; {more}: a longer load, or the built-in one"

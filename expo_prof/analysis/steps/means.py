"""A set of steps in one figure each: the step groups (all, prefill, decode) and the one mean own time.

Every mean or distribution of a step quantity is taken here (docs/glossary.md): the **own time** (the step's
start to the end of its last part), the **cadence** (start to the next step's start) and the critical path per
step, over the numbered steps — never over the window of an unnumbered row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from expo_prof.analysis.dists import dist, fraction, opt_dist
from expo_prof.analysis.model import QShape, StepBreakdown, StepGroup, StepResult
from expo_prof.analysis.overlap.hidden import TimelineAnalysis
from expo_prof.analysis.steps.facts import DECODE, PREFILL, Q, log_q


def numbered(steps: Sequence[StepResult]) -> list[StepResult]:
    """The rows of ``steps`` that are steps (a step id); the row of draws outside any step is not one."""
    return [s for s in steps if s.step is not None]


def mean_own_ns(steps: Sequence[StepResult]) -> float | None:
    """Mean own time of the numbered ``steps`` (``own_ns``, the figure the step table shows, so the bound's
    share and the table's agree) when every one has it, else the mean of their windows' length; None when
    there are none. The one mean own time the report's card, the sampling bound and the saving line use."""
    rows = numbered(steps)
    if rows and all(s.own_ns for s in rows):
        return sum(s.own_ns or 0 for s in rows) / len(rows)
    return sum(s.end_ns - s.start_ns for s in rows) / len(rows) if rows else None


def step_group(steps: list[StepResult]) -> StepGroup:
    timed = [s for s in steps if s.own_ns]
    return StepGroup(
        step_count=len(steps),
        own_ns=opt_dist([s.own_ns for s in timed]),
        critical_ns=dist([s.critical_ns for s in steps]),
        critical_share=fraction(sum(s.critical_ns for s in timed), sum(s.own_ns or 0 for s in timed)),
        cadence_ns=opt_dist([s.cadence_ns for s in steps]),
    )


def step_breakdown(steps: list[StepResult], parts: Sequence[TimelineAnalysis],
                   logs: Sequence[TimelineAnalysis] = ()) -> StepBreakdown:
    """The step itself over ``steps`` (those with a step id): time, critical share, prefill and decode apart,
    batch and q. ``parts``: the analyses the steps come from (their facts say what is missing and why);
    ``logs``: overlay logs of the same ranks not counted (they still say q's shape and dtype)."""
    steps = [s for s in steps if s.step is not None]
    pre = [s for s in steps if s.kind == PREFILL]
    dec = [s for s in steps if s.kind == DECODE]
    q: Counter[tuple[int, int, str | None]] = Counter(
        (s.q_rows, s.q_vocab, s.q_dtype) for s in steps if s.q_rows is not None and s.q_vocab is not None)
    missing: dict[str, str] = {}
    for a in parts:
        for k, why in a.facts.missing.items():
            missing.setdefault(k, why)
    q_from = "steps" if q else None
    if not q:
        for lg in logs:
            q.update(log_q(lg.tl))
        q_from = "overlay-log" if q else None
    if q:
        missing.pop(Q, None)
    sources = {a.facts.time_source for a in parts if a.facts.time_source}
    return StepBreakdown(
        overall=step_group(steps),
        prefill=step_group(pre) if pre else None,
        decode=step_group(dec) if dec else None,
        batch=opt_dist([s.reqs for s in steps]),
        q=[QShape(rows=r, vocab=v, dtype=d, step_count=n) for (r, v, d), n in q.most_common()],
        q_from=q_from,
        own_source="; ".join(sorted(sources)) or None,
        missing=missing,
    )

"""A set of steps in one figure each: the step groups (all, prefill, decode) and the one mean own time.

Every mean or distribution of a step quantity is taken here (docs/glossary.md): the **own time** (the step's
start to the end of its last part), the **cadence** (start to the next step's start) and the critical path per
step, over the numbered steps — never over the window of an unnumbered row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from expo_prof.analysis.dists import dist, fraction
from expo_prof.analysis.model import Dist, QShape, StepBreakdown, StepDists, StepGroup, StepResult
from expo_prof.analysis.overlap.hidden import TimelineAnalysis
from expo_prof.analysis.steps.facts import DECODE, PREFILL, Q, log_q
from expo_prof.analysis.steps.table import NONE, StepTable


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


def _known(col: np.ndarray) -> np.ndarray:
    """The values of a table column the source gave (NONE left out)."""
    return col[col != NONE]


def _opt_dist(col: np.ndarray) -> Dist | None:
    known = _known(col)
    return dist(known) if len(known) else None


def step_group(t: StepTable) -> StepGroup:
    """Own time, cadence and critical path over the rows of ``t``."""
    timed = (t.own != NONE) & (t.own != 0)
    return StepGroup(
        step_count=len(t),
        own_ns=_opt_dist(t.own[timed]),
        critical_ns=dist(t.critical),
        critical_share=fraction(int(t.critical[timed].sum()), int(t.own[timed].sum())),
        cadence_ns=_opt_dist(t.cadence),
    )


def step_dists(t: StepTable) -> StepDists:
    """Distributions of the per-step figures over the rows of ``t`` (forward / wait: null where not known)."""
    return StepDists(
        total_ns=dist(t.total),
        hidden_ns=dist(t.hidden),
        exposed_ns=dist(t.total - t.hidden),
        forward_ns=dist(t.forward[t.forward_known]) if t.forward_known.any() else None,
        wait_ns=dist(t.wait[t.wait_known]) if t.wait_known.any() else None,
        critical_ns=dist(t.critical),
    )


def _q_shapes(t: StepTable) -> Counter[tuple[int, int, str | None]]:
    """Steps per q (rows, vocab, dtype), in the order of each shape's first step (ties of most_common)."""
    has = (t.q_rows != NONE) & (t.q_vocab != NONE)
    return Counter(zip(t.q_rows[has].tolist(), t.q_vocab[has].tolist(), t.q_dtype[has].tolist()))


def step_breakdown(t: StepTable, parts: Sequence[TimelineAnalysis],
                   logs: Sequence[TimelineAnalysis] = ()) -> StepBreakdown:
    """The step itself over the rows of ``t`` with a step id: time, critical share, prefill and decode apart,
    batch and q. ``parts``: the analyses the steps come from (their facts say what is missing and why);
    ``logs``: overlay logs of the same ranks not counted (they still say q's shape and dtype)."""
    t = t.take(t.numbered)
    pre, dec = t.kind == PREFILL, t.kind == DECODE
    q = _q_shapes(t)
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
        overall=step_group(t),
        prefill=step_group(t.take(pre)) if pre.any() else None,
        decode=step_group(t.take(dec)) if dec.any() else None,
        batch=_opt_dist(t.reqs),
        q=[QShape(rows=r, vocab=v, dtype=d, step_count=n) for (r, v, d), n in q.most_common()],
        q_from=q_from,
        own_source="; ".join(sorted(sources)) or None,
        missing=missing,
    )

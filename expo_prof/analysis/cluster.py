"""The cluster view: one recording's ranks side by side, step by step (pure functions).

In a tensor- or expert-parallel job every rank runs the same step and the
step's collectives wait for the last rank to arrive, so a synchronous step
takes as long as its *slowest* rank. Per step (the ranks' shared step id):

* the slowest rank's exposed draw time (``max_exposed_ns``) and forward time
  (``max_forward_ns``): what bounds the step, as opposed to the mean that a
  per-rank table suggests;
* the mean over the ranks (``mean_exposed_ns``, ``mean_hidden_ns``,
  ``mean_forward_ns``, ``mean_wait_ns``): the typical rank. Ranks run a step in
  parallel, so a per-step figure across them is their mean or their maximum,
  never their sum (two ranks' 100 ms steps are one 100 ms step, not 200 ms);
* the skew across ranks (``skew_exposed_ns`` = max − min exposed);
* the stragglers: ranks whose exposed time lies above
  ``median + K · max(MAD, FLOOR_SHARE · median, FLOOR_NS)`` of the step's ranks
  (MAD: median absolute deviation). The floor keeps equal ranks with a few
  ns of jitter from being flagged; with fewer than :data:`MIN_RANKS` ranks
  no rank is flagged (two ranks have no majority to stand out from).

Over the recording: the sum of the per-step maxima against the sum of the
per-step means (``exposed_slowest_ns`` vs ``exposed_mean_ns``), and per rank how
many steps flagged it. :func:`per_step_means` averages the per-step figures
over the steps: what the report's cards and ``analyze``'s tables print per step.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

import numpy as np

from expo_prof.analysis.model import ClusterStep, ClusterView, StepResult
from expo_prof.analysis.arrays import distinct

#: Straggler rule: exposed > median + K · max(MAD, FLOOR_SHARE · median, FLOOR_NS).
K = 3.0
FLOOR_SHARE = 0.05
FLOOR_NS = 1_000
MIN_RANKS = 3
RULE = f"exposed_ns > median + {K:g}·max(MAD, {FLOOR_SHARE:g}·median, {FLOOR_NS} ns) over the step's ranks " \
       f"(at least {MIN_RANKS} ranks)"


def stragglers(values: Sequence[int]) -> list[int]:
    """Indices of the values flagged by the rule above (none with fewer than :data:`MIN_RANKS` values)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < MIN_RANKS:
        return []
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    limit = med + K * max(mad, FLOOR_SHARE * med, FLOOR_NS)
    return [int(i) for i in np.flatnonzero(x > limit)]


def cluster_view(steps: Sequence[StepResult], run: str | None = None) -> ClusterView | None:
    """The cluster view of one recording's steps (rows of :func:`expo_prof.analysis.rollup.analyze_parts`);
    None when the recording has fewer than two ranks with numbered steps.

    On columns: the rows of the steps that have the same number of ranks form one matrix (a step a row, its
    ranks in order the columns), and every per-step figure is a reduction along the rows — no loop per step.
    """
    if len({s.rank for s in steps if s.step is not None}) < 2:  # one rank: no columns built
        return None
    c = _rank_steps(steps)
    ranks = distinct(c.rank).tolist()
    sids, first, counts = np.unique(c.step, return_index=True, return_counts=True)
    fig = _Figures(len(sids))
    for k in distinct(counts).tolist():
        _reduce(c, fig, np.flatnonzero(counts == k), first, k)
    flagged: dict[int, int] = dict.fromkeys(ranks, 0)
    for rk, n in zip(*np.unique(np.concatenate(fig.flags) if fig.flags else np.empty(0, np.int64),
                                return_counts=True)):
        flagged[int(rk)] = int(n)
    out = [ClusterStep(step=sid, ranks=n, slowest_rank=sr, max_exposed_ns=mx, median_exposed_ns=md,
                       min_exposed_ns=mn, skew_exposed_ns=mx - mn, max_forward_ns=fm, slowest_forward_rank=fr,
                       stragglers=st, mean_hidden_ns=mh, mean_exposed_ns=me, mean_forward_ns=mf, mean_wait_ns=mw)
           for sid, n, sr, mx, md, mn, fm, fr, st, mh, me, mf, mw in zip(
               sids.tolist(), counts.tolist(), fig.slowest.tolist(), fig.max.tolist(), fig.median.tolist(),
               fig.min.tolist(), fig.fmax.tolist(), fig.frank.tolist(), fig.stragglers.tolist(),
               fig.mean_hidden.tolist(), fig.mean_exposed.tolist(), fig.mean_forward.tolist(), fig.mean_wait.tolist())]
    known = [int(f) for f in fig.fmax.tolist() if f is not None]
    skews = fig.max - fig.min
    return ClusterView(
        recording=run, ranks=ranks, steps=out, straggler_rule=RULE,
        exposed_slowest_ns=int(fig.max.sum()),
        # The loop this replaced added the means one by one (float): the same order, the same rounding.
        exposed_mean_ns=int(round(reduce(operator.add, fig.mean_exposed.tolist(), 0.0))),
        forward_slowest_ns=sum(known) if known else None,
        skew_p50_ns=int(np.median(skews)), skew_max_ns=int(skews.max()),
        straggler_steps={str(r): n for r, n in flagged.items() if n},
    )


@dataclass
class _Columns:
    """One row per (step, rank), sorted by step then rank (a rank's rows from two sources added up)."""

    step: np.ndarray
    rank: np.ndarray
    exposed: np.ndarray
    hidden: np.ndarray
    forward: np.ndarray  # 0 where not measured
    forward_known: np.ndarray
    wait: np.ndarray
    wait_known: np.ndarray


def _rank_steps(steps: Sequence[StepResult]) -> _Columns:
    """The numbered rows of ``steps`` as columns, one per (step, rank): a rank counted from two sources has one
    row per source and step, and they add up (forward / wait: measured when either measured it)."""
    rows = [s for s in steps if s.step is not None]
    step = np.fromiter((s.step for s in rows), np.int64, len(rows))
    rank = np.fromiter((s.rank for s in rows), np.int64, len(rows))
    o = np.lexsort((rank, step))
    step, rank = step[o], rank[o]

    def col(get) -> np.ndarray:
        return np.fromiter((get(s) for s in rows), np.int64, len(rows))[o]

    fwd = np.array([s.forward_ns for s in rows], dtype=object)[o]
    wait = np.array([s.wait_ns for s in rows], dtype=object)[o]
    fk, wk = fwd != None, wait != None  # noqa: E711 - elementwise on an object array
    fwd[~fk], wait[~wk] = 0, 0
    new = np.concatenate(([True], (step[1:] != step[:-1]) | (rank[1:] != rank[:-1]))) if len(step) else step > 0
    first = np.flatnonzero(new)

    def add(x: np.ndarray) -> np.ndarray:
        return np.add.reduceat(x.astype(np.int64), first) if len(x) else x.astype(np.int64)

    return _Columns(step[first], rank[first], add(col(lambda s: s.exposed_ns)), add(col(lambda s: s.hidden_ns)),
                    add(fwd), np.logical_or.reduceat(fk, first) if len(fk) else fk.astype(bool),
                    add(wait), np.logical_or.reduceat(wk, first) if len(wk) else wk.astype(bool))


class _Figures:
    """The per-step figures, filled group by group (steps with the same number of ranks); None: not measured."""

    def __init__(self, n: int) -> None:
        self.slowest = np.zeros(n, np.int64)
        self.max = np.zeros(n, np.int64)
        self.min = np.zeros(n, np.int64)
        self.median = np.zeros(n, np.int64)
        self.mean_hidden = np.zeros(n, np.float64)
        self.mean_exposed = np.zeros(n, np.float64)
        self.fmax = np.full(n, None, dtype=object)
        self.frank = np.full(n, None, dtype=object)
        self.mean_forward = np.full(n, None, dtype=object)
        self.mean_wait = np.full(n, None, dtype=object)
        self.stragglers = np.empty(n, dtype=object)
        self.stragglers[:] = [[] for _ in range(n)]
        self.flags: list[np.ndarray] = []


def _reduce(c: _Columns, fig: _Figures, which: np.ndarray, first: np.ndarray, k: int) -> None:
    """Fill ``fig`` for the steps ``which`` (indices into the sorted step ids), each of ``k`` ranks."""
    at = first[which][:, None] + np.arange(k)  # their rows: a step a row, its ranks in order
    exp, rank = c.exposed[at], c.rank[at]
    i_max = np.argmax(exp, axis=1)
    r = np.arange(len(which))
    fig.slowest[which] = rank[r, i_max]
    fig.max[which] = exp[r, i_max]
    fig.min[which] = exp.min(axis=1)
    # np.median of each row, as of each step's list (the mean of the two middle values for an even count).
    fig.median[which] = np.median(exp, axis=1).astype(np.int64)
    fig.mean_exposed[which] = np.mean(exp.astype(np.float64), axis=1)
    fig.mean_hidden[which] = np.mean(c.hidden[at].astype(np.float64), axis=1)
    _forward(c, fig, which, at, rank)
    _wait(c, fig, which, at)
    if k >= MIN_RANKS:
        x = exp.astype(np.float64)
        med = np.median(x, axis=1)
        mad = np.median(np.abs(x - med[:, None]), axis=1)
        limit = med + K * np.maximum(np.maximum(mad, FLOOR_SHARE * med), FLOOR_NS)
        hit = x > limit[:, None]
        for j in np.flatnonzero(hit.any(axis=1)).tolist():  # the steps with a straggler: few
            fig.stragglers[int(which[j])] = rank[j][hit[j]].tolist()
        fig.flags.append(rank[hit])


def _forward(c: _Columns, fig: _Figures, which: np.ndarray, at: np.ndarray, rank: np.ndarray) -> None:
    """The slowest forward (the largest; of equal ones the higher rank) and the mean over the ranks that
    measured it; None where none did."""
    f, known = c.forward[at], c.forward_known[at]
    some = known.any(axis=1)
    fmax = np.where(known, f, np.iinfo(np.int64).min).max(axis=1)
    last = at.shape[1] - 1 - np.argmax((known & (f == fmax[:, None]))[:, ::-1], axis=1)
    rows = np.flatnonzero(some)
    fig.fmax[which[rows]] = fmax[rows].astype(object)
    fig.frank[which[rows]] = rank[rows, last[rows]].astype(object)
    fig.mean_forward[which[rows]] = _means(f[rows], known[rows])


def _wait(c: _Columns, fig: _Figures, which: np.ndarray, at: np.ndarray) -> None:
    """The mean wait over the ranks that measured it; None where none did."""
    w, known = c.wait[at], c.wait_known[at]
    rows = np.flatnonzero(known.any(axis=1))
    fig.mean_wait[which[rows]] = _means(w[rows], known[rows])


def _means(x: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Each row's mean over its known values (an object column of floats): a row's reduction where all are known,
    one mean per row only where some are not (a rank that did not measure it: rare)."""
    out = np.mean(x.astype(np.float64), axis=1).astype(object)
    for j in np.flatnonzero(~known.all(axis=1)).tolist():
        out[j] = float(np.mean(x[j][known[j]]))
    return out


def per_step_means(view: ClusterView) -> dict[str, float | None]:
    """The view's per-step figures averaged over its steps: ``{hidden,exposed,forward,wait}_mean`` (the mean of
    ranks) and ``{exposed,forward}_max`` (the slowest rank), in ns per step; None where no step measured it."""

    def avg(values: list[float | int | None]) -> float | None:
        known = [v for v in values if v is not None]
        return float(np.mean(known)) if known else None

    st = view.steps
    return {
        "hidden_mean": avg([s.mean_hidden_ns for s in st]),
        "exposed_mean": avg([s.mean_exposed_ns for s in st]),
        "exposed_max": avg([s.max_exposed_ns for s in st]),
        "forward_mean": avg([s.mean_forward_ns for s in st]),
        "forward_max": avg([s.max_forward_ns for s in st]),
        "wait_mean": avg([s.mean_wait_ns for s in st]),
    }

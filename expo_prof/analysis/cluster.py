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

from collections import defaultdict
from collections.abc import Sequence

import msgspec
import numpy as np

from expo_prof.analysis.model import ClusterStep, ClusterView, StepResult

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
    None when the recording has fewer than two ranks with numbered steps."""
    by_step: dict[int, dict[int, StepResult]] = defaultdict(dict)
    for s in steps:
        if s.step is None:
            continue
        row = by_step[s.step].get(s.rank)
        # A rank counted from two sources has one row per source and step: add them up.
        by_step[s.step][s.rank] = s if row is None else _add(row, s)
    ranks = sorted({r for rows in by_step.values() for r in rows})
    if len(ranks) < 2:
        return None
    out: list[ClusterStep] = []
    flagged: dict[int, int] = {r: 0 for r in ranks}
    bound = mean_sum = 0.0
    fwd_bound: int | None = None
    for sid in sorted(by_step):
        rows = by_step[sid]
        rk = sorted(rows)
        exp = [rows[r].exposed_ns for r in rk]
        i_max = int(np.argmax(exp))
        fwds = [(f, r) for r in rk if (f := rows[r].forward_ns) is not None]
        fmax = max(fwds) if fwds else None
        waits = [w for r in rk if (w := rows[r].wait_ns) is not None]
        flags = [rk[i] for i in stragglers(exp)]
        for r in flags:
            flagged[r] += 1
        bound += exp[i_max]
        mean_sum += float(np.mean(exp))
        if fmax is not None:
            fwd_bound = (fwd_bound or 0) + fmax[0]
        out.append(ClusterStep(
            step=sid, ranks=len(rk), slowest_rank=rk[i_max], max_exposed_ns=int(exp[i_max]),
            median_exposed_ns=int(np.median(exp)), min_exposed_ns=int(min(exp)),
            skew_exposed_ns=int(exp[i_max] - min(exp)),
            max_forward_ns=None if fmax is None else int(fmax[0]),
            slowest_forward_rank=None if fmax is None else int(fmax[1]),
            stragglers=flags,
            mean_hidden_ns=float(np.mean([rows[r].hidden_ns for r in rk])),
            mean_exposed_ns=float(np.mean(exp)),
            mean_forward_ns=float(np.mean([f for f, _ in fwds])) if fwds else None,
            mean_wait_ns=float(np.mean(waits)) if waits else None,
        ))
    skews = [s.skew_exposed_ns for s in out]
    return ClusterView(
        recording=run, ranks=ranks, steps=out, straggler_rule=RULE,
        exposed_slowest_ns=int(bound), exposed_mean_ns=int(round(mean_sum)),
        forward_slowest_ns=fwd_bound,
        skew_p50_ns=int(np.median(skews)), skew_max_ns=int(max(skews)),
        straggler_steps={str(r): n for r, n in flagged.items() if n},
    )


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


def _add(a: StepResult, b: StepResult) -> StepResult:
    """One rank's two rows of a step (two sources of the same rank): their instances add up."""

    def opt(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    return msgspec.structs.replace(a, hidden_ns=a.hidden_ns + b.hidden_ns, exposed_ns=a.exposed_ns + b.exposed_ns,
                                   forward_ns=opt(a.forward_ns, b.forward_ns), wait_ns=opt(a.wait_ns, b.wait_ns))

"""The cluster view: one recording's ranks side by side, step by step (pure functions).

In a tensor- or expert-parallel job every rank runs the same step and the
step's collectives wait for the last rank to arrive, so a synchronous step
takes as long as its *slowest* rank. Per step (the ranks' shared step id):

* the slowest rank's exposed draw time (``max_exposed_ns``) and forward time
  (``max_forward_ns``): what bounds the step, as opposed to the mean that a
  per-rank table suggests;
* the skew across ranks (``skew_exposed_ns`` = max − min exposed);
* the stragglers: ranks whose exposed time lies above
  ``median + K · max(MAD, FLOOR_SHARE · median, FLOOR_NS)`` of the step's ranks
  (MAD: median absolute deviation). The floor keeps equal ranks with a few
  ns of jitter from being flagged; with fewer than :data:`MIN_RANKS` ranks
  no rank is flagged (two ranks have no majority to stand out from).

Over the recording: the sum of the per-step maxima against the sum of the
per-step means (``exposed_bound_ns`` vs ``exposed_mean_ns``), and per rank how
many steps flagged it.
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
    """The cluster view of one recording's steps (rows of :func:`expo_prof.analysis.aggregate.analyze_parts`);
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
        fwds = [(rows[r].forward_ns, r) for r in rk if rows[r].forward_ns is not None]
        fmax = max(fwds) if fwds else None
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
        ))
    skews = [s.skew_exposed_ns for s in out]
    return ClusterView(
        run=run, ranks=ranks, steps=out, rule=RULE,
        exposed_bound_ns=int(bound), exposed_mean_ns=int(round(mean_sum)),
        forward_bound_ns=fwd_bound,
        skew_p50_ns=int(np.median(skews)), skew_max_ns=int(max(skews)),
        straggler_steps={str(r): n for r, n in flagged.items() if n},
    )


def _add(a: StepResult, b: StepResult) -> StepResult:
    fw = None if a.forward_ns is None and b.forward_ns is None else (a.forward_ns or 0) + (b.forward_ns or 0)
    return msgspec.structs.replace(a, exposed_ns=a.exposed_ns + b.exposed_ns, forward_ns=fw)

"""Between runs: do switchback runs of one configuration agree within their intervals, and how far apart are they?

One switchback run's interval holds for the load and the machine of that run. Three runs on one machine
measured "costs 410 µs/step (CI 2–819)", "327 (148–506)" and "1.44 ms (1.16–1.73)": the sign held, the
size moved with the machine's load, and no single interval says so. This module takes the runs' savings
(the lowest rank of each) and says:

* the **between-run spread**: the runs' mean savings, their standard deviation and range, per step and in
  output tok/s;
* whether the runs **differ more than their intervals allow**: Cochran's Q, the inverse-variance weighted
  sum of squared deviations from the weighted mean, ``Q = Σ wᵢ (xᵢ − x̄_w)²`` with ``wᵢ = 1/seᵢ²``, is
  χ² with k − 1 degrees of freedom when every run measures the same saving (Cochran 1954, "The combination
  of estimates from different experiments", Biometrics 10:101–129). ``seᵢ`` is each run's fixed-horizon
  standard error (its 95 % CI's half-width over the t quantile of its pairs). p < 0.05: they differ —
  the size is this load's, and only the sign carries across runs. ``I² = (Q − df) / Q`` (Higgins and
  Thompson 2002) says what share of the spread is between runs rather than noise;
* how many runs decided each way: the decision that carries across runs is the sign they share.

Pure functions over :class:`~expo_prof.analysis.saving.switchback.Saving`; no formats, no I/O.
"""

from __future__ import annotations

import math

import numpy as np

from expo_prof.analysis.model import RunSaving, Saving, Spread
from expo_prof.stats import t_ppf

#: The level at which runs are said to differ more than their intervals allow.
ALPHA = 0.05


def standard_error(sv: Saving) -> float | None:
    """The run's fixed-horizon standard error: its 95 % CI's half-width over t(0.975, pairs − 1)."""
    iv = sv.saving
    if iv is None or iv.ci_ns is None or sv.pairs < 2:
        return None
    lo, hi = sorted(iv.ci_ns)
    se = (hi - lo) / 2.0 / t_ppf(0.975, sv.pairs - 1)
    return se if se > 0 else None


def chi2_sf(x: float, df: int) -> float:
    """P(χ²_df ≥ x) for a whole number of degrees of freedom, in closed form (no scipy at run time)."""
    if x <= 0:
        return 1.0
    half = x / 2.0
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, df // 2):
            term *= half / i
            total += term
        return min(1.0, math.exp(-half) * total)
    total = math.erfc(math.sqrt(half))
    term = math.sqrt(2.0 * x / math.pi) * math.exp(-half)
    for i in range(1, (df + 1) // 2):
        total += term
        term *= x / (2 * i + 1)
    return min(1.0, total)


def cochran_q(means: np.ndarray, ses: np.ndarray) -> tuple[float, int, float, float]:
    """Cochran's Q of estimates ``means`` with standard errors ``ses``: (Q, df, p, I²)."""
    w = 1.0 / ses ** 2
    pooled = float(np.sum(w * means) / np.sum(w))
    q = float(np.sum(w * (means - pooled) ** 2))
    df = len(means) - 1
    i2 = max(0.0, (q - df) / q) if q > 0 else 0.0
    return q, df, chi2_sf(q, df), i2


def between_runs(savings: list[tuple[str, Saving]]) -> Spread | None:
    """The spread of ``(run label, saving)`` pairs (each run's lowest rank); None with fewer than 2 runs."""
    if len(savings) < 2:
        return None
    runs = [RunSaving(run=label, decision=sv.decision, mean_ns=sv.saving.mean_ns if sv.saving else math.nan,
                      se_ns=standard_error(sv), tokps_change_pct=sv.tokps_change_pct, pairs=sv.pairs)
            for label, sv in savings]
    runs = [r for r in runs if not math.isnan(r.mean_ns)]
    if len(runs) < 2:
        return None
    means = np.array([r.mean_ns for r in runs])
    tok = [r.tokps_change_pct for r in runs if r.tokps_change_pct is not None]
    with_se = [r for r in runs if r.se_ns is not None]
    q = p = i2 = None
    df = len(with_se) - 1
    if len(with_se) >= 2:
        q, df, p, i2 = cochran_q(np.array([r.mean_ns for r in with_se]), np.array([r.se_ns for r in with_se]))
    decisions: dict[str, int] = {}
    for r in runs:
        decisions[r.decision] = decisions.get(r.decision, 0) + 1
    return Spread(runs=runs, mean_ns=float(means.mean()), sd_ns=float(means.std(ddof=1)),
                  min_ns=float(means.min()), max_ns=float(means.max()),
                  tokps_sd_pct=float(np.std(tok, ddof=1)) if len(tok) >= 2 else None,
                  tokps_range_pct=[min(tok), max(tok)] if tok else None,
                  cochran_q=q, df=max(df, 0), p=p, i2=i2, differ=p is not None and p < ALPHA, decisions=decisions)


def spread_words(sp: Spread) -> str:
    """The spread in one line: the runs' savings and their spread, whether they differ more than their
    intervals allow, and the sign that carries (module docstring)."""
    from expo_prof.words import fmt_ns, plural

    k = len(sp.runs)
    span = f"{fmt_ns(sp.min_ns, signed=True)} to {fmt_ns(sp.max_ns, signed=True)}/step"
    sd = "" if sp.sd_ns is None else f"SD {fmt_ns(sp.sd_ns)}"
    tok = ("" if sp.tokps_range_pct is None else
           f"output tok/s {sp.tokps_range_pct[0]:+.1f}% to {sp.tokps_range_pct[1]:+.1f}%")
    inner = "; ".join(x for x in (sd, tok) if x)
    head = f"between runs: {plural(k, 'run')} saved {span}" + (f" ({inner})" if inner else "")
    if sp.cochran_q is None or sp.p is None:
        test = "too few runs with an interval to test whether they differ"
    else:
        stat = f"Cochran's Q {sp.cochran_q:.1f}, {sp.df} df, p {sp.p:.3g}; I² {100 * (sp.i2 or 0):.0f}%"
        test = (f"they differ more than their intervals allow ({stat}): the size is each run's load's"
                if sp.differ else f"they agree within their intervals ({stat})")
    ways = ", ".join(f"{n} {d}" for d, n in sorted(sp.decisions.items(), key=lambda t: -t[1]))
    signs = {s for s in (1 if r.mean_ns > 0 else -1 for r in sp.runs)}
    carry = ("the sign carries across them" if len(signs) == 1 else "not even the sign carries across them")
    return f"{head}: {test}; decisions {ways}; {carry}"

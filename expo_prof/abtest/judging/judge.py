"""Compare two sides metric by metric and reach a verdict.

Which test (docs/ab.md has the reasoning):

* **paired** — runs interleaved (off, on, off, on … as ``ab`` does) or
  declared paired: the paired t-test on the per-pair differences, plus the
  exact sign-flip permutation test. Pairing cancels what drifts between
  pairs (a slow first pair, thermal state, other tenants).
* **unpaired** — otherwise: Welch's t-test (no equal-variance assumption)
  plus the exact permutation test of the run labels.

A metric is significant when the t-test's p < alpha and the permutation test
does not contradict it: a permutation test whose smallest attainable p is
already ≥ alpha (3 pairs: 0.25) cannot judge, and is then only reported.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from expo_prof import stats
from expo_prof.version import __version__
from expo_prof.abtest.inputs.sides import Loaded
from expo_prof.abtest.inputs.workloads import check as check_workloads
from expo_prof.abtest.judging import flags as flagmod
from expo_prof.abtest.judging.likeness import unlike
from expo_prof.abtest.judging.mechanism import explain, forward_metric_label
from expo_prof.abtest.judging.verdict import verdict_of
from expo_prof.abtest.metrics import HIGHER, METRICS, Metric, primary_of
from expo_prof.abtest.model import (
    BETTER,
    ENABLE,
    KEEP_OFF,
    MISSING,
    NO_DIFFERENCE,
    NOT_COMPARED,
    SAME,
    UNTESTABLE,
    WORSE,
    ComparisonResult,
    Design,
    Flag,
    MetricResult,
    Sensitivity,
    SideInfo,
    SideStats,
    Test,
)
from expo_prof.errors import BadInput
from expo_prof.words import plural

CONFIDENCE = 0.95


def _side_stats(runs: list[str], vals: list[float | None], flags: list[str]) -> SideStats:
    x = np.array([v for v in vals if v is not None])
    return SideStats(
        runs=runs, values=vals, flags=flags, n=len(x),
        mean=float(x.mean()) if len(x) else None,
        sd=float(np.std(x, ddof=1)) if len(x) >= 2 else None,
    )


def _test(t: stats.TTest | stats.PermTest) -> Test:
    if isinstance(t, stats.TTest):
        return Test(name=t.name, statistic=_finite(t.statistic), df=t.df, p=t.p)
    return Test(name=t.name, statistic=t.statistic, p=t.p, exact=t.exact, arrangements=t.arrangements, min_p=t.min_p)


def _constant(x: np.ndarray) -> bool:
    """All values equal, up to float rounding of the inputs' own digits."""
    return float(np.ptp(x)) <= 1e-9 * max(1.0, float(np.max(np.abs(x))))


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def metric_result(metric: Metric, a_runs: list[str], a_vals: list[float | None], a_flags: list[str],
                  b_runs: list[str], b_vals: list[float | None], b_flags: list[str],
                  pairs: list[tuple[int, int]] | None, alpha: float, not_compared: str | None = None) -> MetricResult:
    """One metric: values, means, change, CI, tests, outcome and runs needed. ``not_compared``: why the two
    sides measure different things (judging/likeness.py): then only the values and means, and that reason."""
    a_st, b_st = _side_stats(a_runs, a_vals, a_flags), _side_stats(b_runs, b_vals, b_flags)
    notes: list[str] = []
    base: dict[str, Any] = dict(name=metric.name, label=metric.label, unit=metric.unit,
                better="higher" if metric.better == HIGHER else "lower", mechanism=metric.mechanism, a=a_st, b=b_st)
    if a_st.n == 0 or b_st.n == 0:
        for st, side_runs, side in ((a_st, a_runs, "A"), (b_st, b_runs, "B")):
            if st.n == 0:
                notes.append(f"missing on side {side} (0 of {len(side_runs)} runs have it)")
        return MetricResult(**base, diff=None, change_pct=None, ci_diff=None, ci_pct=None, paired=pairs is not None,
                            pairs=0, t_test=None, permutation=None, significant=None, outcome=MISSING,
                            runs_needed=None, notes=notes, decided_by=None)
    for st, n_runs, side in ((a_st, len(a_runs), "A"), (b_st, len(b_runs), "B")):
        if st.n < n_runs:
            notes.append(f"present in {st.n} of {n_runs} runs of side {side}")
    if not_compared is not None:
        # Two different things: their difference is no change of either, so none is computed (nor a test of it).
        return MetricResult(**base, diff=None, change_pct=None, ci_diff=None, ci_pct=None, paired=pairs is not None,
                            pairs=0, t_test=None, permutation=None, significant=None, outcome=NOT_COMPARED,
                            runs_needed=None, notes=notes, decided_by=None, not_compared=not_compared)
    assert a_st.mean is not None and b_st.mean is not None  # both sides have values (n > 0)
    diff = b_st.mean - a_st.mean
    change = 100.0 * diff / a_st.mean if a_st.mean else None
    a = np.array([v for v in a_vals if v is not None])
    b = np.array([v for v in b_vals if v is not None])
    usable = [(i, j) for i, j in (pairs or []) if a_vals[i] is not None and b_vals[j] is not None]
    paired = pairs is not None
    t = perm = None
    needed: int | None = None
    if pairs is not None and len(usable) < len(pairs):
        notes.append(f"{len(pairs) - len(usable)} pair(s) without this metric left out of the paired test")
    n_eff = len(usable) if paired else min(len(a), len(b))
    if n_eff < 2:
        if paired:
            why = "only one complete pair" if n_eff == 1 else "no complete pair"
        elif len(a) == len(b) == 1:
            why = "one run per side"
        else:
            why = f"only one run on side {'A' if len(a) == 1 else 'B'}"
        notes.append(f"{why}: no confidence interval or test is possible; the change is an observation only "
                     "(run 3+ per side)")
        return MetricResult(**base, diff=diff, change_pct=change, ci_diff=None, ci_pct=None, paired=paired,
                            pairs=len(usable), t_test=None, permutation=None, significant=None, outcome=UNTESTABLE,
                            runs_needed=None, notes=notes, decided_by=None)
    if paired:
        pa = np.array([a_vals[i] for i, _ in usable])
        pb = np.array([b_vals[j] for _, j in usable])
        t = stats.paired_t(pa, pb, CONFIDENCE)
        perm = stats.sign_flip_test(pa, pb)
        zero_var = _constant(pb - pa)
    else:
        t = stats.welch_t(a, b, CONFIDENCE)
        perm = stats.permutation_test(a, b)
        zero_var = _constant(a) and _constant(b)
    if zero_var:
        notes.append(
            "zero variance: every " + ("pair differed" if paired else "run of each side measured") +
            " exactly the same, so the t-test degenerates (p is 0 or 1); more runs would show the real spread"
        )
    runs = (plural(n_eff, "pair") if paired else f"{plural(len(a), 'run')} per side" if len(a) == len(b)
            else f"{len(a)} vs {plural(len(b), 'run')}")
    if zero_var and t.diff != 0.0:
        return _zero_variance(base, notes, diff, change, paired, len(usable), t, perm, runs, metric, alpha)
    significant, vetoed = stats.significant(t, perm, alpha)
    if vetoed:
        notes.append(f"the {perm.name} test disagrees (p={perm.p:.3g}): not settled")
    elif perm.min_p >= alpha:
        notes.append(f"with {runs} the {perm.name} test cannot go below "
                     f"p={perm.min_p:.3g}; the t-test (normal errors assumed) decides")
    if significant:
        # The tested difference decides the direction (paired: mean of the pair differences).
        outcome = BETTER if t.diff * METRICS[metric.name].better > 0 else WORSE
    else:
        outcome = SAME
        if paired:
            dd = pb - pa
            needed = stats.runs_needed_paired(float(dd.mean()), float(np.std(dd, ddof=1)), alpha)
        else:
            needed = stats.runs_needed_unpaired(diff, float(np.var(a, ddof=1)), float(np.var(b, ddof=1)), alpha)
    scale = 100.0 / a_st.mean if a_st.mean else None
    return MetricResult(
        **base, diff=diff, change_pct=change, ci_diff=[t.ci_low, t.ci_high],
        ci_pct=[t.ci_low * scale, t.ci_high * scale] if scale else None, paired=paired, pairs=len(usable),
        t_test=_test(t), permutation=_test(perm), significant=significant, outcome=outcome, runs_needed=needed,
        notes=notes,
    )


def _zero_variance(base: dict[str, Any], notes: list[str], diff: float, change: float | None, paired: bool,
                   pairs: int, t: stats.TTest, perm: stats.PermTest, runs: str, metric: Metric,
                   alpha: float) -> MetricResult:
    """A difference between sides without spread: the t-test's p (0) and its point CI say nothing, so the
    permutation test alone judges — and where it cannot reach alpha with these runs, nothing can (not testable,
    never "enable" on a degenerate p)."""
    if perm.min_p >= alpha:
        notes.append(f"with {runs} the {perm.name} test cannot go below p={perm.min_p:.3g} and the t-test cannot "
                     "judge runs without spread: no test can decide")
        significant: bool | None = None
        outcome, decided_by = UNTESTABLE, None
    else:
        notes.append(f"the t-test cannot judge runs without spread: the {perm.name} test decides (p={perm.p:.3g})")
        significant = perm.p < alpha
        outcome = (BETTER if diff * METRICS[metric.name].better > 0 else WORSE) if significant else SAME
        decided_by = "permutation"
    return MetricResult(**base, diff=diff, change_pct=change, ci_diff=None, ci_pct=None, paired=paired, pairs=pairs,
                        t_test=_test(t), permutation=_test(perm), significant=significant, outcome=outcome,
                        runs_needed=None, notes=notes, decided_by=decided_by)


class _View:
    """The loaded runs with some left out (per side index sets), pairs adjusted."""

    def __init__(self, loaded: Loaded, drop_a: set[int], drop_b: set[int]):
        self.keep_a = [i for i in range(len(loaded.a.runs)) if i not in drop_a]
        self.keep_b = [i for i in range(len(loaded.b.runs)) if i not in drop_b]
        self.loaded = loaded
        if loaded.pairs is None:
            self.pairs = None
        else:
            ia = {old: new for new, old in enumerate(self.keep_a)}
            ib = {old: new for new, old in enumerate(self.keep_b)}
            self.pairs = [(ia[i], ib[j]) for i, j in loaded.pairs if i in ia and j in ib]

    def result(self, metric: Metric, alpha: float, marks: dict[tuple[str, str, int], str]) -> MetricResult:
        la, lb = self.loaded.a, self.loaded.b
        # Judged on the runs of this view: a run left out no longer makes its side's measure mixed.
        why = unlike(metric, la.name, [la.runs[i] for i in self.keep_a], lb.name, [lb.runs[j] for j in self.keep_b])
        return metric_result(
            metric,
            [la.runs[i].label for i in self.keep_a], [la.runs[i].values.get(metric.name) for i in self.keep_a],
            [marks.get((metric.name, "a", i), "") for i in self.keep_a],
            [lb.runs[j].label for j in self.keep_b], [lb.runs[j].values.get(metric.name) for j in self.keep_b],
            [marks.get((metric.name, "b", j), "") for j in self.keep_b],
            self.pairs, alpha, why,
        )


def _flags(loaded: Loaded, primary: Metric | None, names: list[str]) -> tuple[list[Flag], set[int], set[int], set[int], set[int]]:
    """All flags, and the run indices of warm-up (a, b) and outlier (a, b) runs on the primary metric."""
    a, b = loaded.a, loaded.b
    found: list[Flag] = []
    wa: set[int] = set()
    wb: set[int] = set()
    oa: set[int] = set()
    ob: set[int] = set()
    if primary is not None:
        w = flagmod.warmup(a.name, [r.label for r in a.runs], [r.values.get(primary.name) for r in a.runs],
                           b.name, [r.label for r in b.runs], [r.values.get(primary.name) for r in b.runs],
                           primary.name, primary.better)
        if w:
            found += w
            wa, wb = {0}, {0}
    for name in names:
        for side, skip, bucket in ((a, wa, oa), (b, wb, ob)):
            flagged = flagmod.outliers(side.name, [r.label for r in side.runs], [r.values.get(name) for r in side.runs],
                                       name, skip)
            found += flagged
            if primary is not None and name == primary.name:
                where = {r.label: i for i, r in enumerate(side.runs)}
                bucket.update(where[f.run] for f in flagged)
    return found, wa, wb, oa, ob


def compare(loaded: Loaded, *, alpha: float = 0.05, primary: str | None = None, drop_warmup: bool = False,
            drop_outliers: bool = False, allow_mismatch: bool = False) -> ComparisonResult:
    """The full comparison of the two loaded sides."""
    if not 0.0 < alpha < 0.5:
        raise BadInput(f"--alpha {alpha}: must be between 0 and 0.5")
    workload, wwarn = check_workloads(loaded.a, loaded.b, allow=allow_mismatch)
    present = set().union(*(r.values for r in loaded.a.runs + loaded.b.runs))
    names = [n for n in METRICS if n in present]
    pname = primary_of(set(names), primary)
    if primary and (pname is None or pname not in present):
        raise BadInput(f"--primary {primary}: not a metric of these runs (have: {', '.join(names)})")
    # The forward metric is named by its source (a forward span, or compute-busy time where a trace has none).
    fwd_label = forward_metric_label(loaded)
    metrics = {n: dataclasses.replace(METRICS[n], label=fwd_label) if n == "forward_us_per_step" and fwd_label
               else METRICS[n] for n in names}
    pmetric = metrics[pname] if pname else None
    flag_list, wa, wb, oa, ob = _flags(loaded, pmetric, names)
    drop_a = (wa if drop_warmup else set()) | (oa if drop_outliers else set())
    drop_b = (wb if drop_warmup else set()) | (ob if drop_outliers else set())
    # Per (metric, side, run index): "warm-up" (a run's state, so on every metric) or "outlier" (per metric).
    marks: dict[tuple[str, str, int], str] = {}
    # labels are unique within a side (loader._unique_labels): a run's index by its label, for any number of flags
    where = {"a": {r.label: i for i, r in enumerate(loaded.a.runs)}, "b": {r.label: i for i, r in enumerate(loaded.b.runs)}}
    for f in flag_list:
        side = "a" if f.side == loaded.a.name else "b"
        idx = where[side][f.run]
        for n in names if f.kind == "warm-up" else [f.metric]:
            marks.setdefault((n, side, idx), f.kind)
    view = _View(loaded, drop_a, drop_b)
    results = [view.result(metrics[n], alpha, marks) for n in names]
    by_name = {r.name: r for r in results}
    verdict = verdict_of(by_name.get(pname) if pname is not None else None, results, alpha)
    sens = _sensitivity(loaded, pmetric, alpha, verdict.decision, wa, wb, oa, ob, drop_a, drop_b, marks)
    verdict.caveats += [f"{s.what} the verdict would be: {s.decision}" for s in sens if s.changes_verdict]
    excluded = [loaded.a.runs[i].label for i in sorted(drop_a)] + [loaded.b.runs[j].label for j in sorted(drop_b)]
    pairs = len(view.pairs) if view.pairs is not None else 0
    return ComparisonResult(
        tool_version=__version__,
        a=SideInfo(name=loaded.a.name, sources=loaded.a.sources, runs=[r.label for r in loaded.a.runs],
                   overlay=loaded.a.overlay),
        b=SideInfo(name=loaded.b.name, sources=loaded.b.sources, runs=[r.label for r in loaded.b.runs],
                   overlay=loaded.b.overlay),
        design=Design(paired=loaded.pairs is not None, reason=loaded.design_reason, pairs=pairs, alpha=alpha,
                      confidence=CONFIDENCE, excluded=excluded),
        workload={k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in workload.items()},
        primary_metric=pname, verdict=verdict, metrics=results, flags=flag_list, sensitivity=sens,
        mechanism=explain(by_name, loaded), warnings=loaded.warnings + wwarn, reordered=loaded.reordered,
    )


def _sensitivity(loaded: Loaded, pmetric: Metric | None, alpha: float, decision: str,
                 wa: set[int], wb: set[int], oa: set[int], ob: set[int],
                 drop_a: set[int], drop_b: set[int], marks: dict) -> list[Sensitivity]:
    """The primary metric re-judged for each other choice of leaving flagged runs out."""
    if pmetric is None:
        return []
    choices: list[tuple[str, set[int], set[int]]] = []
    if wa or wb:
        choices.append(("warm-up runs", wa, wb))
    if oa or ob:
        choices.append(("outlier runs", oa, ob))
    if (wa or wb) and (oa or ob):
        choices.append(("warm-up and outlier runs", wa | oa, wb | ob))
    out: list[Sensitivity] = []
    for what, da, db in choices:
        # Main analysis left them out → show them put back, and vice versa.
        if da <= drop_a and db <= drop_b:
            view, label = _View(loaded, drop_a - da, drop_b - db), f"with the {what} put back"
        else:
            view, label = _View(loaded, drop_a | da, drop_b | db), f"without the {what}"
        r = view.result(pmetric, alpha, marks)
        d = verdict_of(r, [r], alpha).decision
        runs = [loaded.a.runs[i].label for i in sorted(da)] + [loaded.b.runs[j].label for j in sorted(db)]
        judge = r.permutation if r.decided_by == "permutation" else r.t_test
        p = judge.p if judge else None
        change = ("not compared" if r.outcome == NOT_COMPARED else "n/a" if r.change_pct is None
                  else f"{r.change_pct:+.2f}%")
        ci = "" if r.ci_pct is None else f" (95% CI {r.ci_pct[0]:+.2f}% to {r.ci_pct[1]:+.2f}%)"
        pv = "" if p is None else f", p={p:.3g}"
        statement = (f"{label} ({', '.join(runs)}): {pmetric.label} {change}{ci}{pv} → {d}"
                     + ("" if d == decision else f" (instead of: {decision})"))
        out.append(Sensitivity(what=label, runs=runs, metric=pmetric.name, change_pct=r.change_pct, ci_pct=r.ci_pct,
                               p=p, decision=d, changes_verdict=d != decision, statement=statement))
    return out


__all__ = ["BETTER", "ENABLE", "KEEP_OFF", "NO_DIFFERENCE", "WORSE", "compare", "metric_result"]

"""The verdict: enable / keep off / no significant difference, said with its uncertainty."""

from __future__ import annotations

from expo_prof.words import plural
from expo_prof.abtest.model import (
    BETTER,
    ENABLE,
    INCONCLUSIVE,
    KEEP_OFF,
    MISSING,
    NO_DIFFERENCE,
    NOT_COMPARED,
    UNTESTABLE,
    WORSE,
    MetricResult,
    Verdict,
)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f}%"


def _ci(r: MetricResult) -> str:
    return "" if r.ci_pct is None else f" (95% CI {_pct(r.ci_pct[0])} to {_pct(r.ci_pct[1])})"


def _runs(r: MetricResult) -> str:
    if r.paired:
        return plural(r.pairs, "pair")
    return f"{r.a.n} vs {plural(r.b.n, 'run')}" if r.a.n != r.b.n else f"{plural(r.a.n, 'run')} per side"


def verdict_of(primary: MetricResult | None, results: list[MetricResult], alpha: float) -> Verdict:
    """The decision on the primary metric, with caveats from the other main metrics."""
    if primary is None:
        return Verdict(decision=NO_DIFFERENCE, metric=None, change_pct=None, ci_pct=None, p=None, test=None,
                       runs_per_side=[0, 0], runs_needed=None, caveats=[],
                       statement="no verdict: no throughput or latency metric in common")
    # The test that judged: the t-test, or the permutation test where zero variance leaves the t-test degenerate.
    judge = primary.permutation if primary.decided_by == "permutation" else primary.t_test
    p = judge.p if judge else None
    test = judge.name if judge else None
    caveats: list[str] = []
    change = f"{primary.label} {_pct(primary.change_pct)}{_ci(primary)}"
    if primary.outcome == MISSING:
        decision = NO_DIFFERENCE
        statement = f"no verdict: {primary.label} is missing on one side"
    elif primary.outcome == NOT_COMPARED:
        # `--primary` on a row whose sides measure different things: no change to decide on, so no decision.
        decision = INCONCLUSIVE
        statement = (f"inconclusive: {primary.label} is not compared — {primary.not_compared}: the two sides "
                     "measure different things; choose a metric both sides measure alike (--primary)")
    elif primary.outcome == UNTESTABLE and primary.t_test is not None:
        # Zero variance with too few runs for the permutation test: the degenerate t-test must not decide.
        decision, p, test = INCONCLUSIVE, None, None
        statement = (f"inconclusive: zero variance — {change} observed, but every "
                     f"{'pair differed' if primary.paired else 'run of each side measured'} exactly the same, so "
                     f"no test can decide with {_runs(primary)}; run more")
    elif primary.outcome == UNTESTABLE:
        # With one run per side no test exists: "no significant difference" would claim too much.
        decision = INCONCLUSIVE
        why = primary.notes[-1].split(":")[0] if primary.notes else "too few runs"
        statement = (f"inconclusive: {why} — {change} observed, but no confidence interval or test is "
                     "possible; run at least 3 per side")
    elif primary.outcome in (BETTER, WORSE):
        decision = ENABLE if primary.outcome == BETTER else KEEP_OFF
        statement = f"{decision}: {change}, {test} p={p:.3g} with {_runs(primary)}"
    else:
        decision = NO_DIFFERENCE
        statement = f"no significant difference at this sample size: {change}, {test} p={p:.3g} with {_runs(primary)}"
        n = primary.runs_needed
        unit = "pairs" if primary.paired else "runs per side"
        if n is not None:
            statement += f"; about {n} {unit} would settle a difference this size (80% power, alpha {alpha:g})"
        elif primary.diff == 0:
            statement += "; the sides measured the same"
        else:
            statement += f"; a difference this small would take more than 1000 {unit} to settle"
    for r in results:
        if r is primary or r.mechanism or r.significant is not True:
            continue
        if decision == ENABLE and r.outcome == WORSE:
            caveats.append(f"{r.label} is significantly worse: {_pct(r.change_pct)}{_ci(r)}")
        elif decision == KEEP_OFF and r.outcome == BETTER:
            caveats.append(f"{r.label} is significantly better: {_pct(r.change_pct)}{_ci(r)}")
    caveats += [f"{primary.label}: {n}" for n in primary.notes]
    return Verdict(
        decision=decision, metric=primary.name, change_pct=primary.change_pct, ci_pct=primary.ci_pct, p=p,
        test=test, runs_per_side=[primary.a.n, primary.b.n], runs_needed=primary.runs_needed,
        statement=statement, caveats=caveats,
    )

"""Why the overlay helps or hurts: exponential time it takes off the critical path vs forward-pass slowdown.

Per step, the overlay removes the exponential draw from the critical path
but the sampler now *waits* for ``q`` (the hand-over from the lane costs time
even when the draw finished long before), and the draw runs *beside* the
forward pass, on a side stream or a spare core, where it can slow the forward
kernels down (contention for SMs / AI cores / memory bandwidth / CPU cores).
What the step pays for the noise is its *critical path* time: the exposed
draw and the sampler's wait, counted once where they overlap
(``critical_ns``, docs/json-output.md). The net per step is
``critical(off) − critical(on) − (forward(on) − forward(off))``; an MoE
model with expert parallelism, whose forward is communication- and
bandwidth-bound, can lose more to contention than it gains.

The numbers are the per-run means over steps from each run's
``analysis.json`` (``summary.per_step``), averaged over the runs of a side.
"""

from __future__ import annotations

from expo_prof.abtest.inputs.sides import Loaded
from expo_prof.abtest.judging.flags import token_arrival, withdraw_speedup
from expo_prof.abtest.model import MIXED_SOURCES_NOTE, Mechanism, MetricResult
from expo_prof.words import MIXED, common_forward_source, fmt_ns, forward_label, forward_source_words


def forward_source(loaded: Loaded) -> str | None:
    """Where the runs' forward time comes from: one source, ``mixed`` when the runs (or the ranks of a run)
    differ, None when no run says (a table given by the user)."""
    return common_forward_source(r.info.get("forward_source") for r in loaded.a.runs + loaded.b.runs)


def side_sources(loaded: Loaded) -> tuple[str | None, str | None]:
    """Each side's forward source (``mixed`` when its runs or ranks differ; None when none says)."""
    return (common_forward_source(r.info.get("forward_source") for r in loaded.a.runs),
            common_forward_source(r.info.get("forward_source") for r in loaded.b.runs))


def unlike_forward(loaded: Loaded) -> str | None:
    """What is missing to name a cause from the forward time of both sides, or None when it is one measure.

    A difference of two forward figures is a slowdown only when both time the same thing: vLLM's
    ``execute_context`` step span on one side and the overlay's ``expo_prof::forward`` span on the other
    differ by what each span encloses, not by contention. None also when no run names its source (a table
    given by the user: its columns are taken as one measure)."""
    off, on = side_sources(loaded)
    if off is None or on is None or (off == on and off != MIXED):
        return None
    if MIXED in (off, on):
        return ("the forward time is not one measure within a side (forward sources differ across its runs or "
                "ranks); to name a cause, both sides need one forward source")
    return (f"the forward time is measured differently on the two sides (off: {forward_label(off)}; "
            f"on: {forward_label(on)}), so their difference is no slowdown; to name a cause, both sides need "
            f"the same forward measure ({forward_source_words(on)} in the off runs too, or "
            f"{forward_source_words(off)} counted in the on runs)")


def forward_metric_label(loaded: Loaded) -> str | None:
    """The ``forward / step`` metric's label named by its source (``forward (expo_prof::forward span) / step``,
    ``compute busy (no forward span) / step``); None when no run says where it comes from."""
    src = forward_source(loaded)
    return None if src is None else f"{forward_label(src)} / step"


def explain(results: dict[str, MetricResult], loaded: Loaded) -> Mechanism:
    """The mechanism summary from the per-metric results (mechanism metrics) of both sides, with how each side's
    tokens arrive (:func:`~expo_prof.abtest.judging.flags.token_arrival`; where one side's arrive in bursts, the
    ITL p50 / mean results are withdrawn as speed-ups: :func:`~expo_prof.abtest.judging.flags.withdraw_speedup`)."""
    arrival = token_arrival(loaded, set(results))
    withdraw_speedup(results, arrival)
    crit = results.get("critical_us_per_step")
    hid = results.get("hidden_exp_us_per_step")
    wait = results.get("wait_us_per_step")
    fwd = results.get("forward_us_per_step")
    tpot = results.get("mean_tpot_ms")
    notes: list[str] = []
    removed = basis = None
    #: Why the exponential taken off the critical path is not measured, when the sides time different things.
    removed_missing = None
    if crit and crit.not_compared is not None:
        # A fused sampler's time (noise + argmax in one op) on one side, the draw's on the other: their difference
        # is no exponential taken off the path. Nor is the on runs' hidden draw an estimate of it: the off runs
        # paid the fused op, not that draw (judging/likeness.py).
        removed_missing = ("the exponential taken off the critical path is not measured: the two sides' critical "
                           f"paths time different things, so their difference is no saving: {crit.not_compared}")
    elif crit and crit.a.mean is not None and crit.b.mean is not None:
        removed = crit.a.mean - crit.b.mean
        basis = "measured: critical-path exponential per step (exposed and sampler wait), off − on"
    elif hid and hid.b.mean is not None:
        removed = hid.b.mean - (wait.b.mean if wait and wait.b.mean is not None else 0.0)
        basis = ("estimated: exponential time hidden per step in the on runs, less their sampler wait "
                 "(the off runs have no exponential timing)")
    f_off = fwd.a.mean if fwd else None
    f_on = fwd.b.mean if fwd else None
    slow = slow_pct = sig = None
    # A cause is named only from like measures: two forward spans of different extent differ by what
    # they enclose, and that difference would read as contention (issue 33).
    missing = unlike_forward(loaded) if f_off is not None and f_on is not None else None
    if missing is None and fwd is not None and fwd.not_compared is not None:  # the row's runs (a view) differ
        missing = f"the forward time is not one measure on the two sides ({fwd.not_compared})"
    if f_off is not None and f_on is not None and missing is None:
        slow = f_on - f_off
        slow_pct = 100.0 * slow / f_off if f_off else None
        sig = fwd.significant if fwd else None
    elif f_on is not None and f_off is None:
        missing = ("the off runs have no forward timing (record them with a profiler, e.g. "
                   "`ab --profiler torch`)")
        notes.append(f"forward-pass slowdown not measured: {missing}")
    if removed_missing is not None:
        missing = removed_missing if missing is None else f"{missing}; {removed_missing}"
    tpot_us = (tpot.b.mean - tpot.a.mean) * 1e3 if tpot and tpot.a.mean is not None and tpot.b.mean is not None else None
    net = removed - slow if removed is not None and slow is not None else None
    if removed is None and slow is None and missing is None:
        statement = ("mechanism unknown: no per-step timing in these inputs (compare run directories with "
                     "analysis.json: the overlay log or a profiler trace)")
        return Mechanism(available=False, exp_removed_us=None, removed_basis=None, forward_off_us=f_off,
                         forward_on_us=f_on, forward_slowdown_us=None, forward_slowdown_pct=None,
                         forward_slowdown_significant=None, net_us=None, tpot_change_us=tpot_us,
                         statement=statement, notes=notes, token_arrival=arrival)
    parts = []
    if removed is not None:
        parts.append(f"the overlay takes {fmt_ns(removed * 1e3)} of exponential off the critical path per step"
                     + (" (estimated)" if basis and basis.startswith("estimated") else ""))
    elif removed_missing is not None and hid and hid.b.mean:
        # What the on side alone says (no difference with the off side's unlike figure).
        waits = (f", and their sampler waits {fmt_ns(wait.b.mean * 1e3)} per step for it"
                 if wait and wait.b.mean is not None else "")
        parts.append(f"the on runs hide {fmt_ns(hid.b.mean * 1e3)} of exponential per step beside the forward{waits}")
    if slow is not None:
        pct = f" ({slow_pct:+.1f}%)" if slow_pct is not None else ""
        qual = "" if sig is None else (", significant" if sig else ", not significant")
        src = forward_source(loaded)
        # Named by its source: compute-busy time (no forward span in the trace) is not a forward pass.
        what = "the forward pass" if src is None else forward_label(src)
        parts.append(f"{what} takes {fmt_ns(abs(slow) * 1e3)} {'more' if slow >= 0 else 'less'} per step under "
                     f"overlap{pct}{qual}")
    statement = "; ".join(parts)
    if net is not None:
        statement += f" → net {fmt_ns(net * 1e3, signed=True)} per step"
        if net < 0 and slow is not None and slow > 0:
            statement += (": contention with the side lane outweighs the hidden exponential — the expected "
                          "mechanism of a regression (as with MoE + expert parallel)")
        elif net > 0:
            statement += ": the hidden exponential outweighs the contention"
    if missing is not None:
        statement += ("; " if statement else "") + f"no cause named: {missing}"
    rest = reconcile = None
    reconciled = removed is not None and removed > 0 and tpot_us is not None and tpot_us > 0
    if tpot_us is not None and not reconciled:  # else the reconciling sentence below says it, once
        statement += f". Measured TPOT change: {fmt_ns(tpot_us * 1e3, signed=True)} per token"
    if removed is not None and removed > 0 and tpot_us is not None and tpot_us > 0:  # i.e. reconciled
        # The per-run lines say the critical path fell, the A/B that the steps got slower: both hold when
        # the rest of the step grew by more than the critical path lost. Said with the figures, and where
        # that rest is only when a like forward measure shows it.
        rest = tpot_us + removed
        span = (f" ({fmt_ns(crit.a.mean * 1e3)} → {fmt_ns(crit.b.mean * 1e3)})"
                if crit and crit.a.mean is not None and crit.b.mean is not None else " (estimated)")
        # A fall beside a rise: said as two changes ("less than" between them read as a comparison of sizes).
        reconcile = (f"how both hold: the critical path per step fell by {fmt_ns(removed * 1e3)}{span} while the "
                     f"measured time per output token (TPOT, one decode step per request) changed by "
                     f"{fmt_ns(tpot_us * 1e3, signed=True)}; so the rest of the step got slower by "
                     f"{fmt_ns(rest * 1e3)}")
        if slow is not None:
            reconcile += (f": {forward_label(forward_source(loaded))} {fmt_ns(slow * 1e3, signed=True)} of it, "
                          f"{fmt_ns((rest - slow) * 1e3, signed=True)} outside the forward and the sampler's "
                          "critical path")
        else:
            # The full reason is said once, above; here only that it is the reason.
            reconcile += ("; where is not measured: the two sides' forward times are different measures" if missing
                          else "; where is not measured: no forward timing on both sides")
        statement += ". " + reconcile[0].upper() + reconcile[1:]
    steps = [int(n) for r in loaded.a.runs + loaded.b.runs if (n := r.info.get("steps"))]
    if steps:
        notes.append(f"per-step means over {min(steps)}–{max(steps)} steps per run")
    sources = {s for r in loaded.a.runs + loaded.b.runs if (s := r.info.get("forward_source"))}
    if len(sources - {MIXED}) > 1:
        notes.append(f"{MIXED_SOURCES_NOTE} ("
                     + ", ".join(forward_label(x) for x in sorted(sources - {MIXED})) + "): compare with care")
    for r in loaded.a.runs + loaded.b.runs:
        if r.info.get("forward_by_rank"):
            notes.append(f"forward sources differ across the ranks of {r.label}: {r.info['forward_by_rank']}")
    return Mechanism(available=True, exp_removed_us=removed, removed_basis=basis, forward_off_us=f_off,
                     forward_on_us=f_on, forward_slowdown_us=slow, forward_slowdown_pct=slow_pct,
                     forward_slowdown_significant=sig, net_us=net, tpot_change_us=tpot_us,
                     statement=statement[0].upper() + statement[1:], notes=notes, cause_missing=missing,
                     rest_change_us=rest, reconcile=reconcile, token_arrival=arrival)

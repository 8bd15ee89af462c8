"""The step itself in the terminal: its own time, cadence, the critical path's share of it, prefill and decode steps apart,
the batch and q (:class:`~expo_prof.analysis.model.StepBreakdown`); at most 80 columns."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from expo_prof.analysis.model import StepBreakdown, StepGroup, StepResult
from expo_prof.analysis.steps.facts import Q, OWN_TIME
from expo_prof.console import safe as escape
from expo_prof.terminal.base import fmt_frac
from expo_prof.words import fmt_ns, plural

#: How the worst-steps table's kind column writes a step (a legend line under the table says it).
KIND_SHORT = {"prefill": "P", "decode": "D"}


def _group_row(name: str, g: StepGroup) -> tuple[str, ...]:
    st = g.own_ns
    return (name, str(g.step_count), fmt_ns(st.p50) if st else "–", fmt_ns(st.mean) if st else "–",
            fmt_ns(g.cadence_ns.p50) if g.cadence_ns else "–", fmt_ns(g.critical_ns.mean),
            fmt_frac(g.critical_share) if g.critical_share is not None else "–")


def render_step(con: Console, b: StepBreakdown | None, draw: bool, ranks: int = 1) -> None:
    """The "The step" block: a row for all steps, prefill and decode apart; the batch; q; and, once each, the
    figures the source cannot give and why. ``ranks`` > 1: the rows pool each rank's steps (rank-steps)."""
    if b is None:
        return
    if b.overall.step_count == 0:  # no step at all: say why once, instead of an empty block
        for what, why in b.missing.items():
            if what == OWN_TIME:
                con.print(f"{what}, prefill / decode, batch size: not measured — {escape(why)}")
        return
    crit = "critical" if draw else "exposed"
    t = Table(title=f"The step — {crit} path beside the step's own time", title_justify="left",
              title_style="bold", pad_edge=False, box=None, header_style="bold")
    for name, just in (("", "left"), ("steps", "right"), ("own p50", "right"), ("own mean", "right"),
                       ("cadence p50", "right"), (f"{crit}/step", "right"), ("share", "right")):
        t.add_column(name, justify=just, no_wrap=True)  # type: ignore[arg-type]
    t.add_row(*_group_row("all", b.overall))
    for name, g in (("prefill", b.prefill), ("decode", b.decode)):
        if g is not None:
            t.add_row(*_group_row(name, g))
    con.print(t)
    if ranks > 1:  # ranks run a step in parallel: each rank's step is one row, never summed over ranks
        con.print(f"steps: each rank's steps pooled ({plural(ranks, 'rank')}; rank-steps, never summed)")
    if b.own_source:  # the source's words speak of the draw; with --op of the op's instances
        con.print(f"own time: {escape(b.own_source if draw else b.own_source.replace('draw or wait', 'instance'))}")
    con.print("cadence: to the next step's start, idle gaps out (what switchback compares)")
    # The share: the steps' critical path summed over their own time summed, not a mean of ratios.
    told = b.prefill is not None or b.decode is not None
    con.print(f"share: {crit} path ÷ own time (each summed)" + ("; prefill: a prompt in the batch" if told else ""))
    if b.batch is not None:
        con.print(f"batch: {plural(b.batch.p50, 'request')} p50 (mean {b.batch.mean:.1f}, max {b.batch.max}) "
                  f"over {plural(b.batch.n, 'step')}")
    if b.q and draw:  # q is the draw's noise: with --op the output speaks of the op only
        # "in N steps", not "×N": a count after the shape read as one more dimension of it
        shapes = ", ".join(f"{x.rows} × {x.vocab} {escape(x.dtype or '?')} in {plural(x.step_count, 'step')}"
                           for x in b.q[:2])
        more = f", +{plural(len(b.q) - 2, 'more shape')}" if len(b.q) > 2 else ""
        where = "all overlay-log steps" if b.q_from == "overlay-log" else "overlay log"
        con.print(f"q ({where}): {shapes}{more}")
    # Each figure the source cannot give, once; figures missing for the same reason share one line.
    why_of: dict[str, list[str]] = {}
    for what, why in b.missing.items():
        if what != Q or draw:
            why_of.setdefault(why, []).append(what)
    for why, whats in why_of.items():
        con.print(f"{', '.join(whats)}: not measured — {escape(why)}")


def worst_columns(draw: bool, fwd_short: str, wait: str = "wait") -> list[tuple[str, str]]:
    """The worst-steps table's columns (80 columns at most, with the widest figures); ``wait``: the wait's
    column, named by its source."""
    return [("rank", "right"), ("step", "right"), ("P/D", "left"), ("reqs", "right"), ("own", "right"),
            (fwd_short, "right"), ("exposed", "right"),
            *([(wait, "right"), ("critical", "right")] if draw else []), ("share", "right")]


def worst_row(st: StepResult, draw: bool) -> list[str]:
    """One worst-steps row: the step, its kind and batch, its time, and what the noise cost of it."""
    return [str(st.rank), "-" if st.step is None else str(st.step), KIND_SHORT.get(st.kind or "", "–"),
            "–" if st.reqs is None else str(st.reqs), fmt_ns(st.own_ns), fmt_ns(st.forward_ns),
            fmt_ns(st.exposed_ns), *([fmt_ns(st.wait_ns), fmt_ns(st.critical_ns)] if draw else []),
            fmt_frac(st.critical_share) if st.critical_share is not None else "–"]


WORST_LEGEND = "P/D: prefill / decode; reqs: its batch; own: own time; share: critical ÷ own"


def worst_steps(steps: list[StepResult], top: int) -> list[StepResult]:
    """The ``top`` steps that cost the critical path most: by ``critical_ns`` (exposed ∪ sampler wait).

    Exposed time alone ranks a fully hidden run's steps by their order (all 0) and puts a step that waited
    milliseconds for ``q`` below steps that waited less. Ties break on exposed time, then rank, step id
    (steps outside any step last) and start, so the choice never depends on input order.
    """
    return sorted(steps, key=lambda s: (-s.critical_ns, -s.exposed_ns, s.rank,
                                        s.step is None, s.step or 0, s.start_ns))[:top]

"""What the overlay saves, as rich tables: switchback's verdict and its parts, and the forward beside the draw.

Shared by ``analyze`` (under each recording) and ``compare RUN`` of a
switchback run. The figures come from :mod:`expo_prof.analysis.saving.switchback`.
"""

from __future__ import annotations

from rich.console import Console
from expo_prof.console import safe as escape  # markup escaped, control / bidi characters visible
from rich.table import Table

from expo_prof.analysis.saving.arrival import BURSTS, SWITCHBACK_MEANING

from expo_prof.analysis.model import SwitchbackArrival
from expo_prof.analysis.model import Natural
from expo_prof.analysis.model import Saving, StepParts
from expo_prof.analysis.saving.words import (
    DROPPED_WORDS,
    SIGN_ONLY,
    TOKPS_DIGITS,
    across_zero,
    arm_words_of,
    ci_column,
    settle_words,
    tokps_ci_text,
    tokps_of,
    tokps_text,
)
from expo_prof.words import fmt_ns, plural


def _parts_rows(t: Table, p: StepParts | None) -> None:
    """The rows under an arm's step: forward, sampler (its wait included) and the rest, adding up to the step."""
    if p is None:
        return
    t.add_row("  forward", fmt_ns(p.forward_ns), "")
    wait = "" if p.log_wait_ns is None else f"its wait for q included (log window {fmt_ns(p.log_wait_ns)})"
    t.add_row("  sampler", fmt_ns(p.sampler_ns), wait)
    t.add_row("  rest", fmt_ns(p.rest_ns), "vLLM's host time outside both")


def arm_words(sv: Saving, arm: str) -> str:
    """How the table names ``arm`` of ``sv``'s run (analysis/saving/words.py ``ARM_WORDS``)."""
    return arm_words_of(arm, len(sv.arms))


def _arrival_rows(t: Table, sv: Saving, arrival: SwitchbackArrival | None) -> None:
    """The compared arms' inter-token gaps (p50; p99, near-zero share), and the flag's words when one of them
    arrives in bursts (analysis/saving/arrival.py): a change in how tokens arrive, not a speed-up."""
    if arrival is None:
        return
    arms = {a.name: a for a in arrival.arms}
    for name in sv.compared:
        a = arms.get(name)
        if a is None:
            continue
        t.add_row(f"token gaps, {arm_words(sv, name)}", fmt_ns(a.p50_ms * 1e6),
                  f"p50; p99 {fmt_ns(a.p99_ms * 1e6)}, {100 * a.near_zero_share:.1f}% near zero (under "
                  f"{fmt_ns(a.near_zero_ms * 1e6)}), {plural(a.gaps, 'gap')} ({name} blocks)")
    for f in arrival.flags:
        if {f.arm, f.against} == set(sv.compared):
            t.add_row(BURSTS, f"{f.arm} blocks", escape("; ".join(f.reasons) + f" — {SWITCHBACK_MEANING}"))


def saving_table(sv: Saving, several: bool = False, under: str = "",
                 arrival: SwitchbackArrival | None = None) -> Table:
    """One rank's switchback result: verdict, each arm's step (forward, sampler, rest), saving, tok/s, the
    forward and sampler changes in words that follow their CIs, the arms' token gaps (``arrival``), what was left
    out and why, what would settle it."""
    who = f", rank {sv.rank}" if several else ""
    base, arm = sv.compared
    what = ("What the overlay saves" if len(sv.arms) == 2
            else f"{arm} ({arm_words(sv, arm)}) against {base} ({arm_words(sv, base)})")
    t = Table(title=f"{what} — switchback, blocks of {sv.block_steps} steps{who}",
              title_justify="left", title_style="bold", pad_edge=False, box=None, show_header=False)
    for just in ("left", "right", "left"):
        t.add_column(justify=just)
    t.add_row("decision", sv.decision, "")
    t.add_row(f"cadence, {arm_words(sv, base)}", fmt_ns(sv.baseline_cadence_ns), f"{plural(sv.baseline_steps, 'step')} ({base} blocks)")
    _parts_rows(t, sv.baseline_parts)
    t.add_row(f"cadence, {arm_words(sv, arm)}", fmt_ns(sv.arm_cadence_ns), f"{plural(sv.arm_steps, 'step')} ({arm} blocks)")
    _parts_rows(t, sv.arm_parts)
    sq = sv.sequence
    if sq is not None:
        cs = ("–" if sq.lo_ns is None or sq.hi_ns is None
              else f"95% confidence sequence {fmt_ns(sq.lo_ns, signed=True)} to {fmt_ns(sq.hi_ns, signed=True)}")
        t.add_row("saved / step", fmt_ns(sq.mean_ns), cs)
        m_tok = tokps_of(sq.margin_ns, sv.baseline_cadence_ns)
        t.add_row("margin", f"±{fmt_ns(sq.margin_ns)}",
                  "no effect inside it" + (f" (±{m_tok:.{TOKPS_DIGITS}f}% output tok/s)" if m_tok is not None else ""))
    elif sv.saving is not None:
        t.add_row("saved / step", fmt_ns(sv.saving.mean_ns), ci_column(sv.saving))
    if sv.tokps_change_pct is not None and sq is None:
        # The digits of every output (analysis/saving/words.py): one figure, never "+29.95%" above "+29.9%".
        t.add_row("output tok/s", tokps_text(sv.tokps_change_pct), tokps_ci_text(sv.tokps_ci_pct, sv.tokps_ci_note))
    if sv.forward_change is not None:
        # Contention is named only where the CI shows the forward slower beside the lane.
        shown = not across_zero(sv.forward_change) and sv.forward_change.mean_ns > 0
        t.add_row(f"forward, {arm} − {base}", fmt_ns(sv.forward_change.mean_ns, signed=True),
                  ci_column(sv.forward_change) + (" (contention with the lane)" if shown else ""))
    if sv.sampler_change is not None:
        t.add_row(f"sampler, {arm} − {base}", fmt_ns(sv.sampler_change.mean_ns, signed=True), ci_column(sv.sampler_change))
    _arrival_rows(t, sv, arrival)
    t.add_row("block pairs", str(sv.pairs), "; ".join(n for n in sv.notes if not n.startswith("left out: ")))
    for reason, n in sv.dropped.items():
        if n:
            t.add_row("left out", str(n), DROPPED_WORDS.get(reason, reason.replace("_", " ")))
    t.add_row("to settle", *settle_words(sv))
    if under:
        # What the interval holds under: another load may measure another size; a decision carries only in sign.
        t.add_row("measured under", "", f"{under}; {SIGN_ONLY}")
    return t


def render_saving(con: Console, savings: list[Saving], natural: list[Natural], under: str = "",
                  arrival: SwitchbackArrival | None = None) -> None:
    """Every rank's saving table, then the forward-beside-the-draw line of each rank; ``under``: the load the
    lowest rank's saving was measured under (RecordingEntry.measured_under); ``arrival``: the run's token gaps by arm
    (RecordingEntry.arrival), in the lowest rank's tables."""
    for sv in savings:
        low = sv.rank == savings[0].rank
        con.print(saving_table(sv, len(savings) > 1, under if low else "", arrival if low else None))
        con.print()
    for nat in natural:
        who = f" (rank {nat.rank})" if len(natural) > 1 else ""
        con.print(f"[bold]forward beside the draw{who}[/]: {escape(nat.statement)}")

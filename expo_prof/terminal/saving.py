"""What the overlay saves, as rich tables: switchback's verdict and its parts, and the forward beside the draw.

Shared by ``analyze`` (under each recording) and ``compare RUN`` of a
switchback run. The figures come from :mod:`expo_prof.analysis.switchback`.
"""

from __future__ import annotations

from rich.console import Console
from expo_prof.console import safe as escape  # markup escaped, control / bidi characters visible
from rich.table import Table

from expo_prof.analysis.switchback import Natural, Saving
from expo_prof.words import fmt_ns, plural


def _ci(ci: list[float] | None) -> str:
    return "" if ci is None else f"95% CI {fmt_ns(ci[0])} to {fmt_ns(ci[1])}"


#: What each arm's steps are, in the table (two arms: "off" is vLLM's own path as shipped).
ARM_WORDS = {"on": "overlay", "native": "engine as shipped", "off": "inline draw"}


def arm_words(sv: Saving, arm: str) -> str:
    """How the table names ``arm`` of ``sv``'s run."""
    return "vLLM's own path" if arm == "off" and len(sv.arms) == 2 else ARM_WORDS.get(arm, arm)


def saving_table(sv: Saving, several: bool = False) -> Table:
    """One rank's switchback result: verdict, step time per phase, saving, tok/s, contention, wait."""
    who = f", rank {sv.rank}" if several else ""
    base, arm = sv.compared
    what = ("What the overlay saves" if len(sv.arms) == 2
            else f"{arm} ({arm_words(sv, arm)}) against {base} ({arm_words(sv, base)})")
    t = Table(title=f"{what} — switchback, blocks of {sv.block_steps} steps{who}",
              title_justify="left", title_style="bold", pad_edge=False, box=None, show_header=False)
    for just in ("left", "right", "left"):
        t.add_column(justify=just)
    t.add_row("verdict", sv.decision, "")
    t.add_row(f"step, {arm_words(sv, base)}", fmt_ns(sv.off_step_ns), f"{plural(sv.off_steps, 'step')} ({base} blocks)")
    t.add_row(f"step, {arm_words(sv, arm)}", fmt_ns(sv.on_step_ns), f"{plural(sv.on_steps, 'step')} ({arm} blocks)")
    if sv.saving is not None:
        t.add_row("saved / step", fmt_ns(sv.saving.mean_ns), _ci(sv.saving.ci_ns))
    if sv.tokps_change_pct is not None:
        ci = "" if sv.tokps_ci_pct is None else f"95% CI {sv.tokps_ci_pct[0]:+.2f}% to {sv.tokps_ci_pct[1]:+.2f}%"
        t.add_row("output tok/s", f"{sv.tokps_change_pct:+.2f}%", ci)
    if sv.forward_change is not None:
        t.add_row(f"forward, {arm} − {base}", fmt_ns(sv.forward_change.mean_ns), _ci(sv.forward_change.ci_ns)
                  + " (contention with the lane)")
    if sv.sampler_change is not None:
        t.add_row(f"sampler, {arm} − {base}", fmt_ns(sv.sampler_change.mean_ns), _ci(sv.sampler_change.ci_ns))
    if sv.wait_on_ns is not None:
        t.add_row("sampler wait", fmt_ns(sv.wait_on_ns), f"per {arm} step")
    t.add_row("block pairs", str(sv.pairs), "; ".join(sv.notes))
    if sv.steps_needed is not None:
        t.add_row("to settle", f"~{sv.steps_needed}", "steps (80% power at alpha 0.05)")
    return t


def render_saving(con: Console, savings: list[Saving], natural: list[Natural]) -> None:
    """Every rank's saving table, then the forward-beside-the-draw line of each rank."""
    for sv in savings:
        con.print(saving_table(sv, len(savings) > 1))
        con.print()
    for nat in natural:
        who = f" (rank {nat.rank})" if len(natural) > 1 else ""
        con.print(f"[bold]forward beside the draw{who}[/]: {escape(nat.statement)}")

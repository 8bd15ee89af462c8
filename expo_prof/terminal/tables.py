"""Rich tables: summary, distributions, per rank, worst steps. Names from traces are escaped.

Laid out to stay readable at 80 columns (a pipe, a CI log): one quantity per
row where a table would otherwise get wide.
"""

from __future__ import annotations

from typing import IO

from rich.cells import cell_len
from rich.console import Console
from expo_prof.console import TextConsole
from expo_prof.console import safe as escape  # markup escaped, control / bidi characters visible
from rich.table import Table

from expo_prof.analysis.cluster import per_step_means
from expo_prof.analysis.model import AnalysisResult, Dist, RankResult, StepResult, Summary
from expo_prof.terminal.base import fmt_frac
from expo_prof.terminal.closing import misses
from expo_prof.terminal.saving import render_saving
from expo_prof.terminal.steps import worst_steps, WORST_LEGEND, render_step, worst_columns, worst_row
from expo_prof.words import (
    wait_label,
    wait_short,
    COMPUTE_BUSY,
    fmt_ns,
    forward_source_words,
    forward_sources_by_rank,
    plural,
)


def _table(title: str, *cols: tuple[str, str]) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", pad_edge=False, box=None, header_style="bold")
    for name, just in cols:
        t.add_column(name, justify=just, no_wrap=True)  # type: ignore[arg-type]
    return t


def _d(d: Dist | None) -> tuple[str, str, str]:
    if d is None or d.n == 0:
        return ("–", "–", "–")
    return (fmt_ns(d.mean), fmt_ns(d.p50), fmt_ns(d.p99))


#: The recognition rules (JSON ``rule``, docs/json-output.md) in words for the tables.
RULE_WORDS = {
    "op": "names matching --op",
    "overlay-span": "overlay's draw span on a device stream",
    "overlay-log": "overlay event log's draw windows",
    "device-kernel": "exponential kernels",
    "ascend-chain": "Ascend's composite exponential (6-7 kernels)",
    "host-span": "overlay's draw span on a CPU thread",
    "cpu-op": "aten::exponential_ on CPU",
    "cpu-fused-gumbel": "vLLM CPU's fused Gumbel op (noise + argmax: an upper bound)",
    "cpu-mrv2-gumbel": "vLLM CPU Model Runner V2's fused Gumbel op (noise + argmax: an upper bound)",
    "mrv2-fused-gumbel": "vLLM / vllm-ascend Model Runner V2's fused Gumbel kernel (noise inside: an upper bound)",
    "flashinfer-sampling": "FlashInfer's sampling kernels (noise inside: an upper bound)",
    "ascend-v2-categorical": "vllm-ascend Model Runner V2's categorical sampling kernels (no noise: a cost)",
}


def rule_words(rule: str) -> str:
    """``host-span+cpu-op`` → the rules in words (unknown names as they are)."""
    return "; ".join(RULE_WORDS.get(r, r) for r in rule.split("+"))


def _short(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


class TableReporter:
    """Human-readable tables on a rich console."""

    def __init__(self, console: Console | None = None, top: int = 10, files: int | None = None) -> None:
        self.console = console
        self.top = top
        #: How many files were read (the closing line counts them; None: not known to the caller).
        self.files = files

    def render(self, result: AnalysisResult, file: IO[str] | None = None) -> None:
        con = self.console
        if file is not None:
            con = TextConsole(file=file, highlight=False, soft_wrap=False)
        elif con is None:
            from expo_prof.console import console

            con = console
        several = len(result.recordings) > 1
        # Results first; recordings without a target instance after them, in one short list (closing.misses).
        entries = [e for e in result.recordings if e.summary is not None or not several]
        for i, entry in enumerate(entries):
            if several:
                if i:
                    con.print()
                side = f" (overlay {entry.overlay})" if entry.overlay else ""
                title = f"[bold]{escape(entry.label)}[/]{side}"
                if cell_len(con.render_str(title).plain) + 4 > con.width:
                    con.print(title)  # a rule would cut the name to its width: the whole name above the rule
                    title = ""
                con.rule(title, align="left")
            if entry.summary is None:
                con.print(f"{escape(entry.label)}: {escape(entry.error or 'no instance found')}")
                continue
            if entry.savings and entry.saving_line:
                # The answer leads (issue 39): what the overlay saves, measured, before any overlap figure.
                con.print(f"[bold]{escape(entry.saving_line)}[/]")
            run = entry.label if several else None
            ranks = [r for r in result.ranks if r.recording == run]
            # Forward is named by its source wherever it is printed: a forward span, or compute-busy time.
            fwd = _Forward(entry.summary.forward_source, ranks)
            self._recording(con, result, entry.summary, ranks, [s for s in result.steps if s.recording == run], fwd)
            view = next((v for v in result.cluster if v.recording == run), None)
            if view is not None:
                self._cluster(con, view, fwd)
            render_saving(con, entry.savings, entry.natural, entry.measured_under, entry.arrival)
            con.print(f"[bold]{escape(entry.headline)}[/]")
            if entry.saving_line and not entry.savings:
                con.print(escape(entry.saving_line))
        if several or result.skipped:
            misses(con, result, self.files)


    def _recording(self, con: Console, result: AnalysisResult, s: Summary, ranks: list[RankResult], steps: list[StepResult],
               fwd: _Forward) -> None:
        draw = result.op is None
        what = "exponential draw" if draw else f"--op {escape(result.op or '')}"
        several = s.ranks > 1
        t = _table(f"Hidden vs exposed time — {what}", ("", "left"), ("", "right"), ("", "left"))
        t.show_header = False
        ids = {st.step for st in steps if st.step is not None}
        # Ranks run their steps in parallel: 2 ranks × 12 steps are 12 steps (24 rank-steps), not 24 steps.
        t.add_row("instances", str(s.instances), f"{plural(s.ranks, 'rank')}, {plural(len(ids), 'step')} "
                  f"({s.rank_steps} rank-steps)" if several else f"1 rank, {plural(s.rank_steps, 'step')}")
        t.add_row("total", fmt_ns(s.total_ns), "")
        t.add_row("hidden", fmt_ns(s.hidden_ns), f"{fmt_frac(s.hidden_fraction)} under other lanes' compute")
        # "Extends the step" only of the draw where a step is known: an --op's exposed time (NCCL beside a
        # half-idle compute lane) or a draw without step markers claims nothing about a step.
        t.add_row("exposed", fmt_ns(s.exposed_ns), "extends the step" if draw and s.rank_steps else
                  "not under other lanes' compute")
        if s.wall_ns != s.total_ns:
            t.add_row("wall (union)", fmt_ns(s.wall_ns), f"{fmt_frac(s.wall_hidden_fraction)} hidden; instances overlap")
        # Totals of the run, like total and exposed above: over several ranks they add up rank-time (per step
        # across ranks see "Across ranks": the mean of ranks and the slowest rank).
        summed = f"summed over {plural(s.ranks, 'rank')}" if several else ""
        # The row names the source beside the short label (the full label would not fit 80 columns).
        t.add_row(fwd.short, fmt_ns(s.forward_ns), "not measured" if s.forward_ns is None
                  else "; ".join(x for x in (escape(fwd.what), summed) if x))
        if draw:
            # Two sources measure the wait, and each prints under its own name (docs/glossary.md, "wait").
            t.add_row(wait_label(s.wait_source), fmt_ns(s.wait_ns),
                      "not measured (no overlay spans or log)" if s.wait_ns is None else summed)
        t.columns[-1].no_wrap = False  # a long detail wraps instead of cutting the figures short at 80 columns
        con.print(t)
        fwd.note(con, said=not fwd.mixed)  # the row named the source (or said it was not measured)
        con.print()

        d = _table(
            # Several ranks: the step columns pool every rank's steps (a rank's step is one value, never a sum
            # over ranks); the mean of ranks and the slowest rank per step are in "Across ranks".
            "Distributions" + (" — step columns over each rank's steps" if several else ""),
            ("", "left"), ("inst mean", "right"), ("inst p50", "right"), ("inst p99", "right"),
            ("/step mean", "right"), ("/step p50", "right"), ("/step p99", "right"),
        )
        pi, ps = s.per_instance, s.per_step
        # A per-step figure needs steps: with none the step columns say so instead of a value.
        _s = _d if s.rank_steps else (lambda _: ("no steps", "", ""))
        d.add_row("total", *_d(pi.total_ns), *_s(ps.total_ns))
        d.add_row("hidden", *_d(pi.hidden_ns), *_s(ps.hidden_ns))
        d.add_row("exposed", *_d(pi.exposed_ns), *_s(ps.exposed_ns))
        d.add_row(fwd.short, "", "", "", *_s(ps.forward_ns))
        if draw:
            d.add_row(wait_short(s.wait_source), "", "", "", *_s(ps.wait_ns))
        con.print(d)
        fwd.note(con)
        con.print()

        # The wait's column is named by its source, as its row above (docs/glossary.md, "wait").
        wait_col = [(wait_short(s.wait_source), "right")] if draw else []
        r = _table(
            "Per rank",
            ("rank", "right"), ("n", "right"), ("total", "right"), ("hidden", "right"), ("exposed", "right"),
            ("hidden %", "right"), ("exp/step p99", "right"), *wait_col,
        )
        for rk in ranks:
            r.add_row(
                str(rk.rank), str(rk.instances), fmt_ns(rk.total_ns), fmt_ns(rk.hidden_ns), fmt_ns(rk.exposed_ns),
                fmt_frac(rk.hidden_fraction), fmt_ns(rk.per_step.exposed_ns.p99) if rk.step_count else "no steps",
                *([fmt_ns(rk.wait_ns)] if draw else []),
            )
        con.print(r)
        con.print()
        src = _table("Found", ("rank", "right"), ("format", "left"), ("found as", "left"), ("names", "left"))
        for rk in ranks:
            items = list(rk.names.items())
            names = ", ".join(f"{escape(_short(n))} ×{c}" for n, c in items[:2])
            if len(items) > 2:
                names += f", +{len(items) - 2} more"
            src.add_row(str(rk.rank), escape(rk.fmt_version or rk.fmt), escape(rule_words(rk.rule)), names)
        src.columns[-1].no_wrap = False
        src.columns[-2].no_wrap = False
        con.print(src)
        con.print()
        render_step(con, s.step_breakdown, draw, s.ranks)

        worst = worst_steps(steps, self.top) if s.rank_steps else []  # no step: no worst step either
        if worst:
            con.print()
            w = _table(
                f"Worst steps by critical path (exposed ∪ wait; top {len(worst)})" if draw
                else f"Worst steps by critical path (exposed; top {len(worst)})",
                # The step's own figures beside what the noise cost of it; hidden % and total are in the
                # distributions above (the table must fit 80 columns).
                *worst_columns(draw, fwd.short, wait_short(s.wait_source)),
            )
            for st in worst:
                w.add_row(*worst_row(st, draw))
            con.print(w)
            con.print(WORST_LEGEND if draw else WORST_LEGEND.replace("critical ÷", "exposed ÷"))
            fwd.note(con)
            con.print()

    def _cluster(self, con: Console, v, fwd: _Forward) -> None:
        """The cluster view (expo_prof/analysis/cluster.py): what bounds a synchronous step, skew, stragglers.
        Per step across ranks: the mean of ranks and the slowest rank (what the report's cards show), never a
        sum — the ranks run the step in parallel."""
        m = per_step_means(v)
        t = _table(f"Across ranks — {plural(len(v.ranks), 'rank')}, {plural(len(v.steps), 'step')}",
                   ("", "left"), ("mean of ranks", "right"), ("slowest rank", "right"))
        t.add_row("exposed per step", fmt_ns(m["exposed_mean"]), fmt_ns(m["exposed_max"]))
        if m["forward_max"] is not None:
            t.add_row(f"{fwd.short} per step", fmt_ns(m["forward_mean"]), fmt_ns(m["forward_max"]))
        t.add_row("exposed, all steps", fmt_ns(v.exposed_mean_ns), fmt_ns(v.exposed_slowest_ns))
        if v.forward_slowest_ns is not None:
            fwd_means = [st.mean_forward_ns for st in v.steps if st.mean_forward_ns is not None]
            t.add_row(f"{fwd.short}, all steps", fmt_ns(sum(fwd_means)), fmt_ns(v.forward_slowest_ns))
        con.print(t)
        con.print("per step: averaged over the steps; all steps: summed over them. A synchronous step lasts as long "
                  "as its slowest rank, so the slowest rank's exposed time bounds the step.")
        if m["forward_max"] is not None:
            fwd.note(con)
        con.print()
        k = _table("", ("", "left"), ("", "right"), ("", "left"))
        k.show_header = False
        k.add_row("skew (max − min)", fmt_ns(v.skew_p50_ns), f"median over steps; max {fmt_ns(v.skew_max_ns)}")
        flagged = ", ".join(f"rank {r} ×{n}" for r, n in sorted(v.straggler_steps.items(), key=lambda x: -x[1])[:8])
        k.add_row("stragglers", str(len(v.straggler_steps)), flagged or "none flagged")
        con.print(k)
        con.print()
        worst = sorted(v.steps, key=lambda x: (-x.skew_exposed_ns, x.step))[: self.top]
        w = _table(f"Most skewed steps (top {len(worst)})", ("step", "right"), ("ranks", "right"),
                   ("slowest", "right"), ("max exposed", "right"), ("median", "right"), ("skew", "right"),
                   (f"max {fwd.short}", "right"), ("stragglers", "left"))
        for st in worst:
            w.add_row(str(st.step), str(st.ranks), str(st.slowest_rank), fmt_ns(st.max_exposed_ns),
                      fmt_ns(st.median_exposed_ns), fmt_ns(st.skew_exposed_ns), fmt_ns(st.max_forward_ns),
                      ", ".join(map(str, st.stragglers)) or "–")
        con.print(w)
        if any(st.max_forward_ns is not None for st in worst):
            fwd.note(con)
        con.print()


class _Forward:
    """How the tables name forward figures: the full label where there is room, a short name (``forward`` or
    ``compute busy``) in narrow tables with a caption naming the source — and each rank's when they differ."""

    def __init__(self, source: str | None, ranks) -> None:
        self.short = "compute busy" if source == COMPUTE_BUSY else "forward"
        self.what = forward_source_words(source)
        self.mixed = len({r.forward_source for r in ranks}) > 1
        self.noted = False
        self.line = (f"{self.short}: sources differ across ranks — "
                     f"{forward_sources_by_rank((r.rank, r.forward_source) for r in ranks)}" if self.mixed
                     else f"{self.short}: {self.what}")

    def note(self, con: Console, said: bool = False) -> None:
        """Name the source under the first table whose rows or columns say only ``forward`` / ``compute busy``
        (once per recording: the later tables are read with it); ``said``: a row already named it."""
        if not self.noted and not said:
            con.print(escape(self.line))
        self.noted = True

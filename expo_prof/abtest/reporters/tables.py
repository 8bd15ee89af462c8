"""Rich tables of a comparison: per-metric runs, means, change, CI, tests; flags; why; the verdict."""

from __future__ import annotations

from expo_prof.words import fmt_ns, plural, visible

from rich import box
from rich.console import Console
from rich.markup import escape as escape_markup
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from expo_prof.abtest.metrics import METRICS
from expo_prof.abtest.model import (
    MIXED_SOURCES_NOTE,
    BETTER,
    BURSTS,
    ENABLE,
    KEEP_OFF,
    MISSING,
    NOT_COMPARED,
    SAME,
    UNTESTABLE,
    WORSE,
    ArrivalSide,
    ComparisonResult,
    MetricResult,
)


def escape(text: object) -> str:
    """Text for the console: control and bidi characters visible, long text cut (words.visible: run labels come
    from tables), rich markup escaped (expo_prof.console.safe, which this layer does not import)."""
    return escape_markup(visible(text))


_MARK = {"warm-up": "ʷ", "outlier": "°"}
_SHORT = {SAME: "n.s.", UNTESTABLE: "not testable"}
_OUTCOME_STYLE = {BETTER: "green", WORSE: "red", UNTESTABLE: "yellow", MISSING: "dim", BURSTS: "yellow",
                  NOT_COMPARED: "yellow"}
_DECISION_STYLE = {ENABLE: "bold green", KEEP_OFF: "bold red"}


def num(v: float | None) -> str:
    """A value as the tables print it: 2 decimals from 1 up (the digits benchmark tools publish), else 4 significant."""
    if v is None:
        return "–"
    return f"{v:.2f}" if abs(v) >= 1 or v == 0 else f"{v:.4g}"


def _ci(v: float) -> str:
    return f"{v:+.0f}" if abs(v) >= 100 else f"{v:+.1f}" if abs(v) >= 10 else f"{v:+.2f}"


def pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.2f}%"


def _p_cell(r: MetricResult) -> str:
    if r.t_test is None:
        return "–"
    s = f"{r.t_test.p:.3g}"
    if r.permutation is not None and r.permutation.p is not None:
        s += f"/{r.permutation.p:.2g}"
    return s


def bursty_metrics(result: ComparisonResult) -> set[str]:
    """The metrics the "tokens arrive in bursts" flag withdraws as speed-ups (empty when it does not stand)."""
    arrival = result.mechanism.token_arrival
    return set(arrival.metrics) if arrival is not None and arrival.bursts else set()


def _shown(result: ComparisonResult, all_metrics: bool) -> list[MetricResult]:
    # A row the burst flag speaks of is shown with it, main or not: the flag names it.
    flagged = bursty_metrics(result)
    return [r for r in result.metrics
            if all_metrics or METRICS[r.name].main or r.name == result.primary_metric or r.name in flagged]


def _name(result: ComparisonResult, r: MetricResult) -> str:
    name = f"{escape(r.label)} [dim]({escape(r.unit)} {'↑' if r.better == 'higher' else '↓'})[/]"
    return f"[bold]{name}[/]" if r.name == result.primary_metric else name


#: Runs shown one by one in the "each run" table (and flags listed); the rest are counted (--json has every one).
MAX_SHOWN = 12


def runs_table(result: ComparisonResult, *, all_metrics: bool = False) -> Table:
    """Each run's value: a row per metric and side, a column per run (pairs share a column when paired); the
    first :data:`MAX_SHOWN` runs, and a count of the others."""
    shown = _shown(result, all_metrics)
    total = max([len(r.a.values) for r in shown] + [len(r.b.values) for r in shown] + [0])
    n = min(total, MAX_SHOWN)
    title = "each run" + (" (column k = pair k)" if result.design.paired else "")
    if total > n:
        title += f" (the first {n} of {total}; --json lists every run)"
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("metric")
    t.add_column("side")
    for i in range(n):
        t.add_column(str(i + 1), justify="right", no_wrap=True)
    for r in shown:
        for k, (st, side) in enumerate(((r.a, result.a.name), (r.b, result.b.name))):
            cells = []
            for v, f in zip(st.values[:n], st.flags[:n], strict=True):
                cells.append(escape(num(v)) + (f"[yellow]{_MARK[f]}[/]" if f in _MARK else ""))
            cells += [""] * (n - len(cells))
            t.add_row(_name(result, r) if k == 0 else "", escape(side), *cells, end_section=k == 1)
    return t


def metric_table(result: ComparisonResult, *, all_metrics: bool = False, fit: Console | None = None) -> Table:
    """One row per metric: means of the runs, change, CI, test, outcome. A row whose sides measure different
    things (``not_compared``) has its means and, in place of a change, the reason: in its outcome cell, or — where
    ``fit``'s width would wrap those cells (80 columns: a pipe, a CI log) — in a note under the table that names
    its rows ("not compared — critical path / step, exposed exp / step: …")."""
    table = _metric_table(result, all_metrics, footnotes=False)
    if fit is not None and any(r.not_compared for r in _shown(result, all_metrics)) and (
            fit.measure(table, options=fit.options.update_width(1 << 20)).maximum > fit.width):  # unwrapped
        table = _metric_table(result, all_metrics, footnotes=True)
    return table


def _metric_table(result: ComparisonResult, all_metrics: bool, *, footnotes: bool) -> Table:
    a, b = result.a.name, result.b.name
    test = "paired t" if result.design.paired else "Welch t"
    caption = f"p: {test} / permutation test · n.s.: no significant difference (~N: runs that would settle it)"
    t = Table(title=f"{escape(b)} vs {escape(a)}: change of the means", title_justify="left",
              caption_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("metric")
    t.add_column(escape(a), justify="right", no_wrap=True)
    t.add_column(escape(b), justify="right", no_wrap=True)
    t.add_column("change", justify="right", no_wrap=True)
    t.add_column("95% CI", justify="right", no_wrap=True)
    # At 80 columns (a pipe, a CI log) the outcome wraps; no column is ever dropped.
    t.add_column("outcome")
    t.add_column("p", justify="right", no_wrap=True)
    said: dict[str, list[str]] = {}  # a reason not to compare → the labels of its rows
    for r in _shown(result, all_metrics):
        ci = "–" if r.ci_pct is None else f"{_ci(r.ci_pct[0])}…{_ci(r.ci_pct[1])}%"
        style = _OUTCOME_STYLE.get(r.outcome, "")
        outcome = escape(_SHORT.get(r.outcome, r.outcome))
        if r.not_compared is not None:
            # No change between two different things: the reason in its place, said once (the draw's rows share
            # one): in full on the first row that has it, or in a note under the table that names its rows.
            rows = said.setdefault(r.not_compared, [])
            rows.append(r.label)
            if not footnotes:
                outcome += ": " + escape(r.not_compared if len(rows) == 1 else f"as for {rows[0]}")
        if r.runs_needed:
            outcome += f" [dim](~{r.runs_needed}{' pairs' if r.paired else '/side'})[/]"
        t.add_row(escape(r.label), num(r.a.mean), num(r.b.mean), pct(r.change_pct), ci,
                  f"[{style}]{outcome}[/]" if style else outcome, _p_cell(r))
    if footnotes:
        caption += "".join(f"\n{NOT_COMPARED} — {escape(', '.join(rows))}: {escape(why)}" for why, rows in said.items())
    t.caption = caption
    return t


def _share(v: float) -> str:
    return f"{100 * v:.1f}%"


def _ms(v: float) -> str:
    return fmt_ns(v * 1e6)


def arrival_table(result: ComparisonResult) -> Table | None:
    """How each side's tokens arrive: its inter-token gaps (mean, near-zero share, p50, p99, max, p99/p50); None
    when not measurable."""
    arrival = result.mechanism.token_arrival
    if arrival is None or not arrival.measured:
        return None
    t = Table(title="how tokens arrive: inter-token gaps of the measured requests", title_justify="left",
              caption=f"near zero: under {100 * arrival.near_zero_share_of_mean:g}% of the side's mean gap",
              caption_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("side")
    for col in ("gaps", "mean", "near zero", "p50", "p99", "max", "p99/p50"):
        t.add_column(col, justify="right", no_wrap=True)
    sides: list[ArrivalSide] = [s for s in (arrival.a, arrival.b) if s is not None]
    for s in sides:
        bursty = arrival.bursty_side == s.name
        t.add_row(escape(s.name) + (" [yellow](bursts)[/]" if bursty else ""), str(s.gaps), _ms(s.mean_ms),
                  f"{_share(s.near_zero_share)} [dim](< {_ms(s.near_zero_ms)})[/]", _ms(s.p50_ms), _ms(s.p99_ms),
                  _ms(s.max_ms), "–" if s.tail_ratio is None else f"{s.tail_ratio:.1f}")
    return t


def render(result: ComparisonResult, console: Console, *, all_metrics: bool = False) -> None:
    """Everything: design, metric table, flags, sensitivity, mechanism, verdict, warnings."""
    d = result.design
    keys = ("model", "num_prompts", "input_len", "output_len", "max_concurrency", "request_rate", "temperature")
    wl = ", ".join(f"{k} {'inf' if v is None and k == 'request_rate' else v}" for k, v in result.workload.items()
                   if k in keys) or "not described by the inputs"
    console.print(
        f"[bold]A/B[/] {escape(result.a.name)} ({plural(len(result.a.runs), 'run')}) vs {escape(result.b.name)} "
        f"({plural(len(result.b.runs), 'run')}) — {'paired' if d.paired else 'unpaired'}: {escape(d.reason)}"
    )
    if result.reordered:  # first thing after the header: the tables below are not in the order the user gave
        console.print(f"[yellow]note:[/] {escape(result.reordered)}")
    console.print(f"[dim]workload: {escape(wl)}[/]")
    if d.excluded:
        console.print(f"[dim]left out of the main analysis: {escape(', '.join(d.excluded))}[/]")
    console.print(runs_table(result, all_metrics=all_metrics))
    console.print(metric_table(result, all_metrics=all_metrics, fit=console))
    arrival = result.mechanism.token_arrival
    if arrival is not None and arrival.measured and (arrival.bursts or all_metrics):
        table = arrival_table(result)
        if table is not None:
            console.print(table)
        if arrival.bursts:
            # The statement begins with the flag's name: said once, in the flag's colour.
            rest = arrival.statement.removeprefix(BURSTS)
            console.print(f"[bold yellow]flag: {BURSTS}[/]{escape(rest)}")
    if result.flags:
        console.print("[bold]flagged runs[/] ([yellow]ʷ[/] warm-up, [yellow]°[/] outlier):")
        for f in result.flags[:MAX_SHOWN]:
            console.print(
                f"  {f.kind}: {escape(f.side)} {escape(f.run)} {escape(f.metric)} = {num(f.value)} "
                f"(median of the others {num(f.reference)}, robust z {f.robust_z:+.1f})"
            )
        if len(result.flags) > MAX_SHOWN:
            console.print(f"  … and {len(result.flags) - MAX_SHOWN} more (--json lists every flag)")
    for s in result.sensitivity:
        mark = "[yellow]changes the verdict[/]: " if s.changes_verdict else ""
        console.print(f"  {mark}{escape(s.statement)}")
    m = result.mechanism
    console.print(f"[bold]why[/]: {escape(m.statement)}")
    for n in m.notes:
        if m.cause_missing and n.startswith(MIXED_SOURCES_NOTE):
            continue  # the statement's "no cause named: …" says it (--json keeps the note)
        console.print(Padding(Text(visible(n), style="dim"), (0, 0, 0, 2)))  # its continuation lines indented alike
    v = result.verdict
    body = escape(v.reason)
    for c in v.caveats:
        body += f"\n[dim]• {escape(c)}[/]"
    console.print(Panel(body, title=f"[{_DECISION_STYLE.get(v.decision, 'bold yellow')}]verdict: {v.decision}[/]",
                        title_align="left", expand=False))
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")

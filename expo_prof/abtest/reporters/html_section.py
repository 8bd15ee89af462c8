"""The A/B section of the HTML report: figures of the runs and of the mechanism, the verdict, the table.

:func:`section_html` returns an HTML fragment (the report page embeds it and
loads plotly.js once); :func:`page` is a self-contained page for
``compare --html``.
"""

from __future__ import annotations

import html

from expo_prof.abtest.metrics import METRICS
from expo_prof.abtest.model import BETTER, BURSTS, ENABLE, KEEP_OFF, NOT_COMPARED, WORSE, ComparisonResult
from expo_prof.abtest.reporters.tables import bursty_metrics, num, pct
from expo_prof.words import fmt_ns, visible

_COLORS = {"a": "#7f7f7f", "b": "#1f77b4"}
#: Most characters of a run label shown in a figure (a label is any text a table's run column held).
_LABEL_MAX = 200


def _t(text: object, limit: int | None = None) -> str:
    """Text from the inputs for markup or a plotly label: control and bidi characters visible, long text cut
    (words.visible), markup characters escaped (plotly renders a subset of HTML in its labels)."""
    return html.escape(visible(text) if limit is None else visible(text, limit))


def runs_figure(result: ComparisonResult):
    """Each run's value of every main metric, side by side, with the mean of each side."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    shown = [r for r in result.metrics if METRICS[r.name].main and not r.mechanism and r.a.n and r.b.n]
    if not shown:
        return None
    fig = make_subplots(rows=1, cols=len(shown), subplot_titles=[f"{r.label} ({r.unit})" for r in shown])
    for col, r in enumerate(shown, 1):
        for key, st, name in (("a", r.a, result.a.name), ("b", r.b, result.b.name)):
            xs = [name] * len(st.values)
            text = [_t(f"{run}{' (' + f + ')' if f else ''}", _LABEL_MAX) for run, f in zip(st.runs, st.flags, strict=True)]
            symbols = ["x" if f else "circle" for f in st.flags]
            fig.add_trace(go.Scatter(x=xs, y=st.values, mode="markers", text=text, name=name,
                                     marker=dict(color=_COLORS[key], size=9, symbol=symbols),
                                     showlegend=col == 1, hovertemplate="%{text}: %{y}<extra></extra>"), 1, col)
            if st.mean is not None:
                fig.add_trace(go.Scatter(x=[name], y=[st.mean], mode="markers", name=f"{name} mean",
                                         marker=dict(color=_COLORS[key], size=22, symbol="line-ew-open",
                                                     line=dict(width=3)),
                                         showlegend=False, hovertemplate=f"mean %{{y}}<extra>{name}</extra>"), 1, col)
    fig.update_layout(height=360, margin=dict(l=40, r=20, t=50, b=30), title="runs of each side (× = flagged)")
    return fig


def mechanism_figure(result: ComparisonResult):
    """Per step: forward pass + exposed exponential of each side (the critical path the overlay changes)."""
    import plotly.graph_objects as go

    by = {r.name: r for r in result.metrics}
    fwd, exp = by.get("forward_us_per_step"), by.get("exposed_exp_us_per_step")
    if not fwd and not exp:
        return None
    sides = [result.a.name, result.b.name]
    fig = go.Figure()
    # Critical path (forward + exposed exponential) stacked; hidden exponential beside it (it overlaps the forward).
    if fwd:
        # The metric's label names the forward time's source (a span, or compute-busy time); plotly renders
        # markup in names, so it is escaped.
        name = _t(fwd.label)
        fig.add_bar(x=sides, y=[fwd.a.mean, fwd.b.mean], name=name, marker_color="#2ca02c",
                    offsetgroup="path", hovertemplate="%{y:.1f} µs<extra>" + name + "</extra>")
    if exp:
        fig.add_bar(x=sides, y=[exp.a.mean, exp.b.mean], name="exposed exponential", marker_color="#d62728",
                    offsetgroup="path", base=[fwd.a.mean or 0, fwd.b.mean or 0] if fwd else None,
                    hovertemplate="%{y:.1f} µs<extra>exposed exponential</extra>")
    hid = by.get("hidden_exp_us_per_step")
    if hid:
        fig.add_bar(x=sides, y=[hid.a.mean, hid.b.mean], name="hidden exponential (beside the forward)",
                    marker_color="#ff9896", offsetgroup="beside", hovertemplate="%{y:.1f} µs<extra>hidden</extra>")
    for r in (fwd, exp):
        if r is not None and (r.a.mean is None or r.b.mean is None):
            missing = result.a.name if r.a.mean is None else result.b.name
            fig.add_annotation(x=missing, y=0, yanchor="bottom", showarrow=False,
                               text=f"no {_t(r.label)} timing<br>for the {_t(missing)} runs")
            break
    title = "why: time per step (µs): critical path, and exponential hidden beside it"
    # Bars of sides that time different things stand side by side, but are no change: said under the title.
    unlike = dict.fromkeys(r.not_compared for r in (fwd, exp, hid) if r is not None and r.not_compared)
    if unlike:
        title += "<br><sup>not compared between the sides: " + "; ".join(_t(u) for u in unlike) + "</sup>"
    fig.update_layout(barmode="group", height=360 + 20 * len(unlike), margin=dict(l=40, r=20, t=50 + 20 * len(unlike), b=30),
                      title=title, yaxis_title="µs per step")
    return fig


def tradeoff_figure(result: ComparisonResult):
    """The trade-off per step: exponential taken off the critical path vs forward-pass slowdown, and the net."""
    import plotly.graph_objects as go

    m = result.mechanism
    if m.exp_removed_us is None or m.forward_slowdown_us is None or m.net_us is None:
        return None
    names = ["exponential removed", "forward slowdown", "net gain"]
    vals = [m.exp_removed_us, -m.forward_slowdown_us, m.net_us]
    colors = ["#1a7f37" if v >= 0 else "#c62828" for v in vals]
    fig = go.Figure(go.Bar(x=names, y=vals, marker_color=colors, text=[fmt_ns(v * 1e3, signed=True) for v in vals],
                           hovertemplate="%{x}: %{y:.1f} µs<extra></extra>"))
    if m.tpot_change_us is not None:
        gain = fmt_ns(-m.tpot_change_us * 1e3, signed=True)
        fig.add_hline(y=-m.tpot_change_us, line_dash="dot", annotation_text=f"measured TPOT change, as a gain: {gain}")
    fig.update_layout(height=320, margin=dict(l=40, r=20, t=50, b=30), yaxis_title="µs per step",
                      title="why: what the overlay removes vs what the overlap costs, per step")
    return fig


def _table_html(result: ComparisonResult) -> str:
    a, b = _t(result.a.name), _t(result.b.name)
    rows = []
    flagged = bursty_metrics(result)
    for r in result.metrics:
        if not METRICS[r.name].main and r.name != result.primary_metric and r.name not in flagged:
            continue
        ci = "–" if r.ci_pct is None else f"{r.ci_pct[0]:+.2f} … {r.ci_pct[1]:+.2f}%"
        p = "–" if r.t_test is None else f"{r.t_test.p:.3g}"
        cls = ("good" if r.outcome == BETTER else "bad" if r.outcome == WORSE
               else "unsure" if r.outcome in (BURSTS, NOT_COMPARED) else "")
        # Two sides that measure different things: their values, no change — the reason in its place.
        outcome = r.outcome if r.not_compared is None else f"{r.outcome}: {r.not_compared}"
        runs_a = " ".join(num(v) for v in r.a.values)
        runs_b = " ".join(num(v) for v in r.b.values)
        rows.append(
            f"<tr><td>{_t(r.label)} ({_t(r.unit)})</td><td>{runs_a}</td><td>{runs_b}</td>"
            f"<td>{num(r.a.mean)}</td><td>{num(r.b.mean)}</td><td>{pct(r.change_pct)}</td><td>{ci}</td>"
            f"<td>{p}</td><td class='{cls}'>{_t(outcome)}</td></tr>"
        )
    head = (f"<tr><th>metric</th><th>{a} runs</th><th>{b} runs</th><th>{a} mean</th><th>{b} mean</th>"
            "<th>change</th><th>95% CI</th><th>p</th><th>outcome</th></tr>")
    return f"<table class='ab'>{head}{''.join(rows)}</table>"


def _arrival_html(result: ComparisonResult) -> str:
    """How each side's tokens arrive (a table of their inter-token gaps) and the burst flag; "" when not
    measurable (nothing is said then)."""
    arrival = result.mechanism.token_arrival
    if arrival is None or not arrival.measured:
        return ""

    def ms(v: float) -> str:
        return _t(fmt_ns(v * 1e6))

    rows = []
    for s in (arrival.a, arrival.b):
        if s is None:
            continue
        ratio = "–" if s.tail_ratio is None else f"{s.tail_ratio:.1f}"
        mark = " (bursts)" if arrival.bursty_side == s.name else ""
        rows.append(f"<tr><td>{_t(s.name)}{mark}</td><td>{s.gaps}</td><td>{ms(s.mean_ms)}</td>"
                    f"<td>{100 * s.near_zero_share:.1f}% (&lt; {ms(s.near_zero_ms)})</td><td>{ms(s.p50_ms)}</td>"
                    f"<td>{ms(s.p99_ms)}</td><td>{ms(s.max_ms)}</td><td>{ratio}</td></tr>")
    head = ("<tr><th>side</th><th>gaps</th><th>mean</th>"
            f"<th>near zero (under {100 * arrival.near_zero_share_of_mean:g}% of the mean gap)</th>"
            "<th>p50</th><th>p99</th><th>max</th><th>p99/p50</th></tr>")
    parts = [f"<p><b>how tokens arrive:</b> inter-token gaps of the measured requests</p>"
             f"<table class='ab arrival'>{head}{''.join(rows)}</table>"]
    if arrival.bursts:
        rest = arrival.statement.removeprefix(BURSTS)  # the statement begins with the flag's name: said once
        parts.append(f"<p class='flag unsure'><b>flag: {_t(BURSTS)}</b>{_t(rest)}</p>")
    return "".join(parts)


def section_html(result: ComparisonResult, *, include_plotlyjs: bool | str = False) -> str:
    """The A/B section as an HTML fragment (plotly.js not included unless asked)."""
    v = result.verdict
    cls = "good" if v.decision == ENABLE else "bad" if v.decision == KEEP_OFF else "unsure"
    parts = [
        "<section class='ab-section'><h2>A/B: should the overlay be on?</h2>",
        f"<p class='verdict {cls}'><b>verdict: {_t(v.decision)}</b> — {_t(v.reason)}</p>",
    ]
    if v.caveats:
        parts.append("<ul>" + "".join(f"<li>{_t(c)}</li>" for c in v.caveats) + "</ul>")
    d = result.design
    parts.append(f"<p>{'paired' if d.paired else 'unpaired'} analysis: {_t(d.reason)}</p>")
    if result.reordered:
        parts.append(f"<p class='note'>{_t(result.reordered)}</p>")
    parts.append(_table_html(result))
    arrival = _arrival_html(result)
    if arrival:
        parts.append(arrival)
    parts.append(f"<p><b>why:</b> {_t(result.mechanism.statement)}</p>")
    for s in result.sensitivity:
        parts.append(f"<p class='note'>{_t(s.statement)}</p>")
    first = True
    for fig in (runs_figure(result), mechanism_figure(result), tradeoff_figure(result)):
        if fig is not None:
            parts.append(fig.to_html(full_html=False, include_plotlyjs=include_plotlyjs if first else False))
            first = False
    parts.append("</section>")
    return "\n".join(parts)


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}
table.ab{border-collapse:collapse;font-size:14px}table.ab td,table.ab th{border:1px solid #ccc;padding:4px 8px}
.good{color:#1a7f37}.bad{color:#c62828}.unsure{color:#9a6700}.note{color:#555}"""


def page(result: ComparisonResult) -> str:
    """A self-contained page (plotly.js inlined: works offline); ``compare`` writes it as every output is
    written (expo_prof/output.py: never half a page under its name)."""
    body = section_html(result, include_plotlyjs=True)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>expo-prof A/B</title>"
            f"<style>{_STYLE}</style></head><body>{body}</body></html>\n")

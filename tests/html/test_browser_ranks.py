"""Several ranks on the report page, in a real headless Chromium: per step the mean of ranks and the slowest rank,
never their sum (ranks run a step in parallel); the cards say the same numbers as the chart; forward is named by
its source on the page.

The two-rank runs are recorded in the test session (tests/conftest.py: make_run.py ``--world 2``, two
processes in a gloo group, each profiled by the real torch profiler); the expected per-step values are computed
here, independently of the page's code, from ``expo-prof analyze --json``'s per-rank step rows.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from expo_prof.cli.main import main
from expo_prof.html.build import report_document
from expo_prof.words import fmt_ns  # the pages' Expo.fmtNs prints what the one Python formatter prints


def _analyze_json(capsys, *args: str) -> dict:
    """``expo-prof analyze ARGS --json`` as the command prints it."""
    with pytest.raises(SystemExit) as ei:
        main(["analyze", *args, "--json"])
    out, err = capsys.readouterr()
    assert ei.value.code == 0, err
    return json.loads(out)


def _per_rank(doc: dict, key: str) -> dict[int, dict[int, int]]:
    """step → rank → the rank's value of ``key`` in that step (a rank's rows of one step add up)."""
    by: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for st in doc["steps"]:
        if st["step"] is not None and st[key] is not None:
            by[st["step"]][st["rank"]] += st[key]
    return by


def _open_report(tmp_path, open_page, *args, **kw):
    """The report page of ``args`` (report_document's keywords ``kw``), loaded offline, without errors."""
    doc = report_document(list(args), **kw)
    out = tmp_path / "report.html"
    out.write_text(doc.text)
    page = open_page(out, offline=True)
    assert page.errors() == []
    return page


def _chart(page, cid: str = "steps-chart") -> dict[str, tuple[list, list]]:
    """The plotted traces of a chart, by name: (x, y) as plotly holds them."""
    data = page.evaluate(f"document.getElementById('{cid}').data.map(t => [t.name, t.x, t.y])")
    return {n: (x, y) for n, x, y in data}


def _card(page, cid: str) -> tuple[str, str, str]:
    """A headline card's label, value and detail line."""
    return tuple(page.evaluate(f"['.k', '.v', '.d'].map(s => document.querySelector('#{cid} ' + s).textContent)"))


def test_all_ranks_chart_plots_mean_and_slowest_rank_never_the_sum(tmp_path, open_page, ranks_run, capsys):
    """GIVEN a real synchronous 2-rank run WHEN its report loads in Chromium THEN the per-step chart's "all ranks"
    view plots, per step, the mean over the ranks and the slowest rank's value of exposed time and of forward
    time — computed here from analyze --json's per-rank rows — and no trace, option or value is the sum of the
    ranks."""
    doc = _analyze_json(capsys, str(ranks_run))
    assert doc["summary"]["ranks"] == 2
    page = _open_report(tmp_path, open_page, ranks_run)
    options = page.evaluate("Array.from(document.querySelectorAll('#rank option')).map(o => o.textContent)")
    assert options[0] == "all ranks: mean of ranks and slowest rank" and not any("sum" in o for o in options)
    chart = _chart(page)
    assert not any("sum" in name for name in chart)
    fwd = "forward (expo_prof::forward span)"
    for key, mean_name, max_name, scale in (
        ("exposed_ns", "exposed, mean of ranks", "exposed, slowest rank", 1e3),
        ("forward_ns", f"{fwd}, mean of ranks", f"{fwd}, slowest rank", 1e6),
    ):
        by = _per_rank(doc, key)
        steps = sorted(by)
        assert chart[mean_name][0] == steps and chart[max_name][0] == steps
        for sid, y_mean, y_max in zip(steps, chart[mean_name][1], chart[max_name][1]):
            vals = list(by[sid].values())
            assert len(vals) == 2 and min(vals) > 0, (key, sid, vals)  # both ranks ran the step
            assert y_mean * scale == pytest.approx(sum(vals) / 2, rel=1e-9), (key, sid)
            assert y_max * scale == pytest.approx(max(vals), rel=1e-9), (key, sid)
            assert y_mean * scale < sum(vals) * 0.75 and y_max * scale < sum(vals)  # not the sum of the ranks
    # AND hidden time per step is the mean of ranks too (the stacked bars: mean hidden + mean exposed)
    hid = _per_rank(doc, "hidden_ns")
    bars = chart["hidden, mean of ranks"]
    assert [y * 1e3 for y in bars[1]] == pytest.approx([sum(hid[s].values()) / len(hid[s]) for s in bars[0]])


def test_cards_say_what_the_chart_shows(tmp_path, open_page, ranks_run):
    """GIVEN the 2-rank run's report WHEN the cards are read THEN exposed and forward per step are the mean over
    steps of the chart's mean-of-ranks series, the "slowest rank" figures the mean of its slowest-rank series, and
    the labels say "mean of ranks": the same number for the same thing."""
    page = _open_report(tmp_path, open_page, ranks_run)
    chart = _chart(page)

    def mean(ys):
        return sum(ys) / len(ys)

    label, value, detail = _card(page, "c-exposed")
    assert label == "exposed time per step — mean of ranks"
    assert value == fmt_ns(mean(chart["exposed, mean of ranks"][1]) * 1e3)
    assert detail.startswith(f"slowest rank {fmt_ns(mean(chart['exposed, slowest rank'][1]) * 1e3)} · ")
    fwd = "forward (expo_prof::forward span)"
    label, value, detail = _card(page, "c-forward")
    assert label == f"{fwd} per step — mean of ranks"
    assert value == fmt_ns(mean(chart[f"{fwd}, mean of ranks"][1]) * 1e6)
    assert detail.startswith(f"slowest rank {fmt_ns(mean(chart[f'{fwd}, slowest rank'][1]) * 1e6)} · ")


def test_one_rank_of_several_is_that_ranks_own_steps(tmp_path, open_page, ranks_run, capsys):
    """GIVEN the 2-rank run's report WHEN rank 1 is chosen in the selector THEN the chart holds rank 1's own
    exposed and forward time per step, as analyze --json has them."""
    doc = _analyze_json(capsys, str(ranks_run))
    page = _open_report(tmp_path, open_page, ranks_run)
    page.evaluate("(() => { const s = document.getElementById('rank'); s.value = '1';"
                  " s.dispatchEvent(new Event('change')); })()")
    chart = _chart(page)
    exp, fwd = _per_rank(doc, "exposed_ns"), _per_rank(doc, "forward_ns")
    xs, ys = chart["exposed"]
    assert [y * 1e3 for y in ys] == pytest.approx([exp[s][1] for s in xs])
    xs, ys = chart["forward (expo_prof::forward span)"]
    assert [y * 1e6 for y in ys] == pytest.approx([fwd[s][1] for s in xs])


def test_compute_busy_forward_is_named_so_on_the_page(tmp_path, open_page, nccl_trace):
    """GIVEN a real A100 trace without forward spans, reported with --op nccl WHEN the page loads THEN the forward
    card, the chart's forward trace and axis, and the per-rank table's column say "compute busy (no forward
    span)", and no label calls it a forward pass."""
    page = _open_report(tmp_path, open_page, nccl_trace, op="nccl")
    busy = "compute busy (no forward span)"
    assert _card(page, "c-forward")[0] == f"{busy} per step"
    assert busy in _chart(page)
    assert page.evaluate("document.getElementById('steps-chart').layout.yaxis2.title.text") == f"{busy} (ms)"
    head = page.evaluate("Array.from(document.querySelectorAll('#rank-tbl thead th')).map(t => t.textContent)")
    assert f"{busy} per step" in head and "forward/step" not in head
    assert busy in page.evaluate("document.getElementById('steps-note').textContent")


def test_mixed_forward_sources_are_said_on_the_page(tmp_path, open_page, mixed_ranks_run):
    """GIVEN a real 2-rank run where only rank 0 has the forward span (rank 1's forward figure is compute-busy
    time) WHEN its report loads THEN the forward card is labelled as mixed and its detail names each rank's source,
    the per-rank table has a forward-source column saying which rank has which, and each rank's own view of the
    chart names that rank's source."""
    page = _open_report(tmp_path, open_page, mixed_ranks_run)
    span, busy = "forward (expo_prof::forward span)", "compute busy (no forward span)"
    label, _, detail = _card(page, "c-forward")
    assert label == "forward (mixed sources) per step — mean of ranks"
    assert f"rank 0: {span}; rank 1: {busy}" in detail
    rows = page.evaluate("(() => { const t = document.getElementById('rank-tbl');"
                         " const h = Array.from(t.querySelectorAll('thead th')).map(c => c.textContent);"
                         " const i = h.indexOf('forward source');"
                         " return Array.from(t.querySelectorAll('tbody tr'))"
                         ".map(r => [r.cells[0].textContent, r.cells[i].textContent]); })()")
    assert rows == [["0", span], ["1", busy]]
    for rank, name in (("0", span), ("1", busy)):
        page.evaluate(f"(() => {{ const s = document.getElementById('rank'); s.value = '{rank}';"
                      " s.dispatchEvent(new Event('change')); })()")
        assert name in _chart(page)

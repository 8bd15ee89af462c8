"""`compare` shows no change for a row whose two sides measure different things — on the committed real runs.

Real data: traces/samples/tiny-cpu-off-on holds an overlay-off run (01-off) and an overlay-on run (02-on) of
vLLM's CPU server, recorded by `expo-prof record`. The off run is vLLM CPU as shipped: its sampler draws the
Gumbel noise inside its fused op `_C::fused_gumbel_argmax` (noise + argmax), so the analysis's instances there
are that op (rule `cpu-fused-gumbel`, a fused sampler); the on run's are the overlay's draw alone (the
`expo_prof::exponential` span, rule `host-span`). Its forward is vLLM's `execute_context` step span off and the
overlay's `expo_prof::forward` span on. So the draw, exposed, hidden, critical-path and forward rows compare
different things: GIVEN those runs WHEN compared (JSON, table, page) THEN those rows keep each side's values
and say why they are not compared, with no change, CI or test; the client's rows (output tok/s, TTFT) still
show their change.
"""

from __future__ import annotations

import json

import pytest
from ab_helpers import metric, ok_json  # type: ignore[import-not-found]
from shared_paths import REPO  # type: ignore[import-not-found]

SAMPLE = REPO / "traces" / "samples" / "tiny-cpu-off-on"
OFF, ON = SAMPLE / "01-off", SAMPLE / "02-on"
#: The rows whose sides time different instances (the fused op off, the draw on).
INSTANCE_ROWS = ("critical_us_per_step", "exposed_exp_us_per_step", "hidden_exp_us_per_step", "exp_us_per_step")
UNLIKE_ROWS = (*INSTANCE_ROWS, "forward_us_per_step")
#: Rows of the client's figures: one measure on both sides, compared as ever.
LIKE_ROWS = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms")
#: Every field of a row that states a change between the sides (or judges one).
CHANGE_FIELDS = ("diff", "change_pct", "ci_diff", "ci_pct", "t_test", "permutation", "significant", "runs_needed",
                 "decided_by")


@pytest.fixture(scope="module")
def out() -> dict:
    from ab_helpers import run_cli  # type: ignore[import-not-found]

    return ok_json(run_cli("compare", str(OFF), str(ON), "--json"))


def test_the_sample_is_the_case_described():
    """The data is what the docstring says: each run's saved analysis names the rule that found its instances and
    the forward's source; the off rule is one of the analysis's fused samplers, the on rule is not."""
    from expo_prof.analysis.targets import FUSED_SAMPLERS

    off, on = (json.loads((d / "analysis.json").read_text()) for d in (OFF, ON))
    assert [r["rule"] for r in off["ranks"]] == ["cpu-fused-gumbel"] and "cpu-fused-gumbel" in FUSED_SAMPLERS
    assert [r["rule"] for r in on["ranks"]] == ["host-span"] and "host-span" not in FUSED_SAMPLERS
    assert off["ranks"][0]["forward_source"] == "execute_context"
    assert on["ranks"][0]["forward_source"] == "expo_prof::forward"


def test_unlike_rows_carry_the_reason_and_no_change_in_the_json(out):
    for name in UNLIKE_ROWS:
        r = metric(out, name)
        # THEN no change, CI, test or significance, and the outcome says it was not compared …
        assert r["outcome"] == "not compared", name
        assert {k: r[k] for k in CHANGE_FIELDS} == dict.fromkeys(CHANGE_FIELDS), name
        # … each side's values are kept (the one run of each side, its mean) …
        assert r["a"]["values"] == [r["a"]["mean"]] and r["b"]["values"] == [r["b"]["mean"]], name
        # … and the reason says what each side measured.
        assert "(off) vs" in r["not_compared"] and r["not_compared"].endswith("(on)"), name
    for name in INSTANCE_ROWS:
        why = metric(out, name)["not_compared"]
        assert "_C::fused_gumbel_argmax" in why and "noise+argmax" in why and "the exponential draw alone" in why
    assert metric(out, "forward_us_per_step")["not_compared"] == (
        "forward by vLLM execute_context step span (off) vs expo_prof::forward span (on)")


def test_like_rows_still_show_their_change(out):
    for name in LIKE_ROWS:
        r = metric(out, name)
        a, b = r["a"]["mean"], r["b"]["mean"]
        assert r["not_compared"] is None and r["outcome"] == "not testable"  # one run per side
        assert r["diff"] == pytest.approx(b - a) and r["change_pct"] == pytest.approx(100 * (b - a) / a)
    assert metric(out, "output_throughput")["change_pct"] < -40  # the on run's real drop, as recorded
    # AND the verdict is about output tok/s, its change said
    v = out["verdict"]
    assert v["metric"] == "output_throughput" and v["change_pct"] == metric(out, "output_throughput")["change_pct"]


def test_the_mechanism_names_no_saving_or_slowdown_from_unlike_measures(out):
    m = out["mechanism"]
    # THEN neither what the overlay takes off the critical path nor the forward's slowdown is computed
    for key in ("exp_removed_us", "removed_basis", "forward_slowdown_us", "forward_slowdown_pct",
                "forward_slowdown_significant", "net_us", "rest_change_us", "reconcile"):
        assert m[key] is None, key
    # AND the statement says why, for both, and names no cause; each side's forward stays
    assert "critical path is not measured" in m["cause_missing"] and "forward time is measured differently" in m[
        "cause_missing"]
    assert f"no cause named: {m['cause_missing']}" in m["statement"]
    assert "off the critical path per step" not in m["statement"] and "fell by" not in m["statement"]
    # AND what the on side alone says stays: its hidden draw and its sampler's wait per step
    from expo_prof.words import fmt_ns

    hid, wait = metric(out, "hidden_exp_us_per_step"), metric(out, "wait_us_per_step")
    assert m["statement"].startswith(f"The on runs hide {fmt_ns(hid['b']['mean'] * 1e3)} of exponential per step "
                                     f"beside the forward, and their sampler waits {fmt_ns(wait['b']['mean'] * 1e3)}")
    fwd = metric(out, "forward_us_per_step")
    assert (m["forward_off_us"], m["forward_on_us"]) == (fwd["a"]["mean"], fwd["b"]["mean"])
    # AND the TPOT change (a like measure) is still said
    tpot = metric(out, "mean_tpot_ms")
    assert m["tpot_change_us"] == pytest.approx((tpot["b"]["mean"] - tpot["a"]["mean"]) * 1e3)


def _row(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(label))


def test_the_table_prints_the_reason_not_a_change(out, cli):
    proc = cli("compare", str(OFF), str(ON), "--all-metrics")
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout.split("change of the means", 1)[1].split("p: Welch t", 1)[0]
    from expo_prof.abtest.reporters.tables import num, pct

    by_label = {metric(out, n)["label"]: metric(out, n) for n in UNLIKE_ROWS}
    first = metric(out, "critical_us_per_step")
    for label, r in by_label.items():
        row = _row(table, label)
        # THEN the row keeps each side's mean, prints no change (no % at all) and says why
        assert num(r["a"]["mean"]) in row and num(r["b"]["mean"]) in row, row
        assert "%" not in row and "not compared: " in row, row
        # the old, wrong change of the means is nowhere in it
        if r["a"]["mean"]:
            assert pct(100 * (r["b"]["mean"] - r["a"]["mean"]) / r["a"]["mean"]) not in table
        # the draw's rows share one reason: said in full on the first, referred to on the others
        if r["name"] in INSTANCE_ROWS and r["name"] != first["name"]:
            assert f"not compared: as for {first['label']}" in row, row
        else:
            assert f"not compared: {r['not_compared']}" in row, row
    for name in LIKE_ROWS:
        r = metric(out, name)
        assert pct(r["change_pct"]) in _row(table, r["label"])
    # AND the why line names no saving from the unlike critical paths
    why = " ".join(proc.stdout.split("why:", 1)[1].split())
    assert "critical path is not measured" in why and "off the critical path per step" not in why


def test_the_page_prints_the_reason_not_a_change(out, cli, tmp_path):
    page = tmp_path / "ab.html"
    proc = cli("compare", str(OFF), str(ON), "--format", "html", "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    import html

    text = page.read_text()
    table = text.split("<table class='ab'>", 1)[1].split("</table>", 1)[0]
    rows = {html.unescape(r.split("</td>", 1)[0]): r for r in table.split("<tr><td>")[1:]}
    for name in ("critical_us_per_step", "exposed_exp_us_per_step", "forward_us_per_step"):  # the main rows
        r = metric(out, name)
        row = html.unescape(rows[f"{r['label']} ({r['unit']})"])
        assert f"not compared: {r['not_compared']}" in row and "%" not in row, row
    r = metric(out, "output_throughput")
    assert f"{r['change_pct']:+.2f}%" in rows[f"{r['label']} ({r['unit']})"]
    # AND the mechanism figure, whose bars stand side by side, says they are not compared
    assert "not compared between the sides" in text


def test_at_80_columns_the_reasons_go_under_the_table(out):
    """GIVEN a terminal of 80 columns (a pipe, a CI log), too narrow for the reasons in the outcome cells WHEN the
    table is printed THEN each unlike row says "not compared" and no change, and the note under the table names
    its rows and the reason (each reason once); nothing is wider than the terminal."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run([sys.executable, "-m", "expo_prof", "compare", str(OFF), str(ON)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    table, below = proc.stdout.split("change of the means", 1)[1].split("p: Welch t", 1)
    for name in ("critical_us_per_step", "exposed_exp_us_per_step", "forward_us_per_step"):  # the main rows
        row = _row(table, metric(out, name)["label"].split(" / ")[0][:13])
        assert row.split()[-2:] == ["compared", "–"] and "%" not in row, row
    notes = " ".join(below.split("why:", 1)[0].split())
    crit, fwd = metric(out, "critical_us_per_step"), metric(out, "forward_us_per_step")
    assert (f"not compared — critical path / step, exposed exp / step: {crit['not_compared']}") in notes
    assert f"not compared — {fwd['label']}: {fwd['not_compared']}" in notes
    assert notes.count(crit["not_compared"]) == 1

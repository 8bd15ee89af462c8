"""`compare` reproduces a published per-run A/B table to the published digits.

No per-run table of the async exponential feature itself is public (see
data/README.md); the fixture is the best public per-run A/B found: vLLM PR
#7117's three trials per side of benchmark_throughput.py, published with
"Already 1.5% improvement in throughput".
"""

from __future__ import annotations

import json
import math

import scipy.stats as ss
from ab_helpers import DATA  # type: ignore[import-not-found]

PR = DATA / "vllm-pr7117"
#: The published trials, typed in from the PR comment (independent of the CSV files the tool reads).
MAIN_TOK_S = [12453.04, 12342.76, 12434.40]
PR_TOK_S = [12555.73, 12591.35, 12667.68]
MAIN_REQ_S = [24.32, 24.11, 24.29]
PR_REQ_S = [24.52, 24.59, 24.74]


def test_compare_reproduces_the_published_trials_means_and_change(cli):
    # GIVEN the published trials as one CSV per side (rows = trials)
    # WHEN compare reads them
    proc = cli("compare", str(PR / "main.csv"), str(PR / "pr.csv"), "--labels", "main,pr", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    by = {m["name"]: m for m in out["metrics"]}
    tok, req = by["total_token_throughput"], by["request_throughput"]
    # THEN every trial is kept as published, in order
    assert tok["a"]["values"] == MAIN_TOK_S and tok["b"]["values"] == PR_TOK_S
    assert req["a"]["values"] == MAIN_REQ_S and req["b"]["values"] == PR_REQ_S
    # AND the means of the trials are those of the published numbers, to their 2 decimals
    assert round(tok["a"]["mean"], 2) == 12410.07 and round(tok["b"]["mean"], 2) == 12604.92
    assert round(req["a"]["mean"], 2) == 24.24 and round(req["b"]["mean"], 2) == 24.62
    # AND the change equals the change of those means; its first decimal is the published "1.5%"
    # (published as a lower bound, "already 1.5%": the change truncated to one decimal)
    for m, a, b in ((tok, MAIN_TOK_S, PR_TOK_S), (req, MAIN_REQ_S, PR_REQ_S)):
        expected = 100 * (sum(b) / 3 - sum(a) / 3) / (sum(a) / 3)
        assert m["change_pct"] == expected or math.isclose(m["change_pct"], expected, rel_tol=1e-12)
        assert math.floor(m["change_pct"] * 10) / 10 == 1.5
    assert round(tok["change_pct"], 2) == 1.57 and round(req["change_pct"], 2) == 1.55


def test_the_published_blocks_are_judged_unpaired_with_scipy_values(cli):
    # GIVEN the same trials (run as two blocks, not interleaved)
    proc = cli("compare", str(PR / "main.csv"), str(PR / "pr.csv"), "--json")
    out = json.loads(proc.stdout)
    tok = {m["name"]: m for m in out["metrics"]}["total_token_throughput"]
    # THEN the analysis is unpaired: Welch's t and its interval equal scipy's on the published numbers
    ref = ss.ttest_ind(PR_TOK_S, MAIN_TOK_S, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert out["design"]["paired"] is False and tok["t_test"]["name"] == "Welch t"
    assert math.isclose(tok["t_test"]["p"], ref.pvalue, rel_tol=1e-9)
    mean_a = sum(MAIN_TOK_S) / 3
    assert math.isclose(tok["ci_pct"][0], 100 * ci.low / mean_a, rel_tol=1e-9)
    assert math.isclose(tok["ci_pct"][1], 100 * ci.high / mean_a, rel_tol=1e-9)
    # AND the verdict states the uncertainty: primary metric (no output_throughput column) is total tok/s
    assert out["primary_metric"] == "total_token_throughput"
    assert out["verdict"]["decision"] == "enable"
    assert "95% CI" in out["verdict"]["statement"] and "Welch t p=" in out["verdict"]["statement"]
    # AND with 3 vs 3 runs the permutation test cannot reach 0.05 (smallest p = 2/20), which is said
    assert tok["permutation"]["min_p"] == 0.1
    assert any("cannot go below p=0.1" in n for n in tok["notes"])

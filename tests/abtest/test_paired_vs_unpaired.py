"""Why the method matters: a warm-up pair hides a consistent +2% from an unpaired test.

The numbers are SYNTHETIC (no per-run table of the feature is public, see
data/README.md); they are built to have the shape the published A/B tables
of the feature show: a first run far below the others on both sides, and the
same small gain within every off/on pair.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.stats as ss
from ab_helpers import session_dir  # type: ignore[import-not-found]

#: Interleaved runs off, on, off, on …: pair 1 is the warm-up (both ~12% low), every pair gains ~+2%.
OFF = [880.0, 1000.0, 1006.0, 995.0]
ON = [898.0, 1021.0, 1025.0, 1016.0]


@pytest.fixture
def session(tmp_path):
    runs = []
    for off, on in zip(OFF, ON, strict=True):
        runs += [(False, {"output_throughput": off}, None), (True, {"output_throughput": on}, None)]
    return session_dir(tmp_path / "session", runs)


def _tput(out):
    return {m["name"]: m for m in out["metrics"]}["output_throughput"]


def test_paired_analysis_sees_the_consistent_gain(session, cli):
    # GIVEN the interleaved session WHEN compared (paired, as ab runs are)
    out = json.loads(cli("compare", str(session), "--json").stdout)
    t = _tput(out)
    # THEN the +2% is clear: paired t p equals scipy's and is far below 0.05 → enable
    ref = ss.ttest_rel(ON, OFF)
    assert t["t_test"]["p"] == pytest.approx(ref.pvalue, rel=1e-9) and ref.pvalue < 0.01
    assert out["verdict"]["decision"] == "enable"
    assert t["change_pct"] == pytest.approx(100 * (np.mean(ON) - np.mean(OFF)) / np.mean(OFF))
    # AND the first pair is flagged as warm-up on both sides
    warm = [(f["side"], f["run"]) for f in out["flags"] if f["kind"] == "warm-up"]
    assert warm == [("off", "01-off"), ("on", "02-on")]
    assert t["a"]["flags"] == ["warm-up", "", "", ""] and t["b"]["flags"] == ["warm-up", "", "", ""]


def test_unpaired_analysis_misses_it_and_says_what_the_warmup_changes(session, cli):
    # GIVEN the same runs analysed unpaired (as if they were two unrelated sets)
    out = json.loads(cli("compare", str(session), "--unpaired", "--json").stdout)
    t = _tput(out)
    # THEN Welch's test (equal to scipy's) finds nothing at this sample size …
    ref = ss.ttest_ind(ON, OFF, equal_var=False)
    assert t["t_test"]["p"] == pytest.approx(ref.pvalue, rel=1e-9) and ref.pvalue > 0.05
    assert out["verdict"]["decision"] == "no significant difference"
    assert out["verdict"]["runs_needed"] is not None and out["verdict"]["runs_needed"] > 4
    # … AND the sensitivity says that leaving the warm-up runs out changes the verdict to enable
    (s,) = out["sensitivity"]
    assert s["what"] == "without the warm-up runs" and s["runs"] == ["01-off", "02-on"]
    ref2 = ss.ttest_ind(ON[1:], OFF[1:], equal_var=False)
    assert s["p"] == pytest.approx(ref2.pvalue, rel=1e-9) and s["decision"] == "enable" and s["changes_verdict"]
    # AND --drop-warmup makes that the main analysis (and shows the runs put back)
    out2 = json.loads(cli("compare", str(session), "--unpaired", "--drop-warmup", "--json").stdout)
    assert out2["verdict"]["decision"] == "enable" and out2["design"]["excluded"] == ["01-off", "02-on"]
    assert _tput(out2)["a"]["values"] == OFF[1:]
    assert out2["sensitivity"][0]["what"] == "with the warm-up runs put back"


def test_table_output_states_the_uncertainty(session, cli):
    # GIVEN the unpaired analysis printed as tables
    proc = cli("compare", str(session), "--unpaired")
    # THEN the verdict line carries change, CI, test and runs needed, and the warm-up is explained
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "verdict: no significant difference" in text and "95% CI" in text and "Welch t p=" in text
    assert "would settle" in text and "warm-up" in text and "changes the verdict" in text


def test_outliers_need_enough_runs_and_a_real_deviation(tmp_path, cli):
    # GIVEN 6 runs per side with one run 8% low on side on, and tiny noise elsewhere
    runs = []
    off = [1000.0, 1002.0, 999.0, 1001.0, 1003.0, 1000.5]
    on = [1020.0, 1021.0, 940.0, 1019.0, 1022.0, 1020.5]
    for a, b in zip(off, on, strict=True):
        runs += [(False, {"output_throughput": a}, None), (True, {"output_throughput": b}, None)]
    s = session_dir(tmp_path / "s", runs)
    out = json.loads(cli("compare", str(s), "--json").stdout)
    # THEN that run is an outlier (robust z beyond 3.5), the noise is not, and dropping it is evaluated
    flags = [(f["kind"], f["run"]) for f in out["flags"]]
    assert flags == [("outlier", "06-on")]
    assert _tput(out)["b"]["flags"][2] == "outlier"
    assert out["sensitivity"][0]["what"] == "without the outlier runs"
    # AND with 3 runs per side nothing is called an outlier (a MAD of 3 values flags noise)
    s3 = session_dir(tmp_path / "s3", runs[:6])
    out3 = json.loads(cli("compare", str(s3), "--json").stdout)
    assert not [f for f in out3["flags"] if f["kind"] == "outlier"]

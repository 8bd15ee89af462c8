"""Between switchback runs (expo_prof/analysis/saving/spread.py): Cochran's Q, its p-value, the spread, and the CLI.

GIVEN savings of real switchback runs (the committed samples, read through the pipeline) and hand-made estimates
WHEN the spread is computed THEN its χ² tail equals scipy's, Q equals the textbook sum, runs of one recording agree
(Q = 0) and the two different samples differ far beyond their intervals, with the words following the test; and
``compare RUN1 RUN2`` of switchback runs prints the spread line first and writes it in its JSON schema.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from expo_prof.analysis.saving.spread import between_runs, chi2_sf, cochran_q, spread_words, standard_error

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "traces" / "samples"


@pytest.mark.parametrize("df", range(1, 12))
def test_chi2_tail_is_scipys(df):
    for x in (0.01, 0.7, 2.0, 9.5, 31.0, 140.0):
        assert chi2_sf(x, df) == pytest.approx(sps.chi2.sf(x, df), rel=1e-10, abs=1e-300)


def test_cochran_q_is_the_weighted_sum():
    means, ses = np.array([410.2, 326.9, 1440.0]), np.array([208.0, 91.6, 146.0])
    q, df, p, i2 = cochran_q(means, ses)
    w = 1 / ses ** 2
    want = float(np.sum(w * (means - np.sum(w * means) / np.sum(w)) ** 2))
    assert (q, df) == (pytest.approx(want, rel=1e-12), 2) and p == pytest.approx(sps.chi2.sf(want, 2), rel=1e-10)
    assert i2 == pytest.approx((want - 2) / want)


def _savings(*names: str):
    from expo_prof.pipeline import run

    return [(e.label, e.savings[0]) for e in run([SAMPLES / n for n in names]).document.recordings]


def test_one_recording_twice_agrees_and_two_configurations_differ():
    one = _savings("tiny-cpu-sequential")
    same = between_runs(one + one)
    assert same is not None and same.cochran_q == 0.0 and same.p == 1.0 and not same.differ
    assert "agree within their intervals" in spread_words(same) and "the sign carries" in spread_words(same)
    two = between_runs(_savings("tiny-cpu-switchback", "tiny-cpu-sequential"))
    assert two is not None and two.differ and two.p < 1e-6 and two.decisions == {"enable": 1, "keep off": 1}
    words = spread_words(two)
    assert "differ more than their intervals allow" in words and "not even the sign carries" in words
    # the standard errors are each run's CI half-width over its t quantile
    for r, (_, sv) in zip(two.runs, _savings("tiny-cpu-switchback", "tiny-cpu-sequential")):
        lo, hi = sorted(sv.saving.ci_ns)
        assert r.se_ns == pytest.approx((hi - lo) / 2 / sps.t.ppf(0.975, sv.pairs - 1), rel=1e-9)
        assert standard_error(sv) == r.se_ns


def test_compare_of_switchback_runs_says_the_spread_first(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(SAMPLES / "tiny-cpu-sequential", a)
    shutil.copytree(SAMPLES / "tiny-cpu-sequential", b)
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    cli = [sys.executable, "-m", "expo_prof", "compare", str(a), str(b), str(SAMPLES / "tiny-cpu-switchback")]
    text = subprocess.run(cli, capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("between runs: 3 runs saved ") and "differ more than their intervals allow" in lines[0]
    assert sum("saving (switchback): " in ln for ln in lines) == 3
    doc = json.loads(subprocess.run(cli + ["--json"], capture_output=True, text=True, timeout=300, cwd=REPO,
                                    env=env).stdout)
    assert doc["schema_name"] == "expo-prof.switchback-runs" and [r["run"] for r in doc["runs"]] == cli[4:7]
    assert doc["spread"]["df"] == 2 and " ".join(text.stdout.split()).startswith(doc["spread_line"])

"""``ab`` across launches decides as it goes (expo_prof/record/launches.py): the switchback's confidence sequence
over launch pairs, with a launch budget.

GIVEN output tok/s changes of launch pairs (hand-made: a clear win, no effect, noise) WHEN looked at THEN the
decision follows the sequence (enable / no effect beyond the margin / undecided with the pairs still needed), and
no decision comes before 6 pairs. GIVEN ``ab`` without --repeat against a STAND-IN server (the same server both
sides: no overlay runs there) and a budget of 12 launches WHEN it runs THEN it launches off, on … up to the budget,
stops there (or once settled), writes launches.json whose changes are the runs' own tok/s, and prints its answer
before the fixed-horizon comparison.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from expo_prof.errors import BadInput
from expo_prof.record.launches import LaunchRule, line, look, pair_changes, parse_rule
from expo_prof.serving.launch import free_port
from expo_prof.words import NO_EFFECT

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "support" / "openai_standin.py"


def test_a_clear_win_settles_at_the_sixth_pair_not_before():
    rule = LaunchRule(margin_pct=1.0, launches=20)
    changes = [5.1, 4.8, 5.3, 4.9, 5.2, 5.0, 5.1]
    assert look(changes[:5], rule).decision == "undecided" and look(changes[:5], rule).lo_pct is None
    sq = look(changes, rule)
    assert (sq.decision, sq.settled_at) == ("enable", 6) and sq.lo_pct > 0
    assert line(sq).startswith("ab: enable — 7 launch pairs, output tok/s +5.06%")


def test_no_effect_and_undecided():
    rule = LaunchRule(margin_pct=1.0, launches=20)
    assert look([0.01, -0.02, 0.015, -0.01, 0.0, 0.005], rule).decision == NO_EFFECT
    noisy = look([13.4, -12.0, 20.0, -30.0, 9.0, 0.3], rule)
    assert noisy.decision == "undecided" and noisy.pairs_needed and "more launch pairs would settle it" in line(noisy)


def test_budget_and_margin_words():
    assert parse_rule("2%", "16 launches") == LaunchRule(margin_pct=2.0, launches=16)
    assert parse_rule("1%", "30m") == LaunchRule(margin_pct=1.0, seconds=1800.0)
    assert parse_rule("1%", None).launches == 20
    for margin, budget in (("20us", None), ("1%", "10 launches"), ("1%", "soon")):
        with pytest.raises(BadInput):
            parse_rule(margin, budget)
    rule = LaunchRule(margin_pct=1.0, launches=12)
    assert not rule.spent(10, 0.0) and rule.spent(11, 0.0) and rule.spent(12, 0.0)


def _write_run(path: Path, tokps: float) -> Path:
    path.mkdir()
    (path / "manifest.json").write_text(json.dumps({"expo_prof": "x", "metrics": {"output_throughput": tokps}}))
    return path


def test_pair_changes_are_on_over_off(tmp_path):
    runs = [(False, _write_run(tmp_path / "1", 100.0)), (True, _write_run(tmp_path / "2", 110.0)),
            (False, _write_run(tmp_path / "3", 200.0)), (True, _write_run(tmp_path / "4", 190.0))]
    assert pair_changes(runs) == pytest.approx([10.0, -5.0])
    assert pair_changes(runs[1:]) == []  # (on, off) is no pair: the sides are in the order they ran


@pytest.mark.slow
def test_ab_launches_pairs_until_its_budget(tmp_path):
    port = free_port()
    top = tmp_path / "ab"
    cmd = [sys.executable, "-m", "expo_prof", "ab", "--budget", "12 launches", "--num-prompts", "2", "--input-len",
           "8", "--output-len", "8", "--session-dir", str(top), "--", sys.executable, str(STANDIN), "--port",
           str(port), "--max-model-len", "256"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = json.loads((top / "session.json").read_text())["runs"]
    n = len(runs)
    assert n % 2 == 0 and 2 * 6 <= n <= 12
    assert [r["overlay"] for r in runs] == [i % 2 == 1 for i in range(n)]
    sq = json.loads((top / "launches.json").read_text())
    assert sq["pairs"] == n // 2 and sq["stopped"] in ("settled", "budget")
    assert sq["stopped"] == "settled" or n == 12
    tok = [json.loads((top / r["dir"] / "manifest.json").read_text())["metrics"]["output_throughput"] for r in runs]
    want = [100 * (tok[i + 1] / tok[i] - 1) for i in range(0, n, 2)]
    assert sq["changes_pct"] == pytest.approx(want, rel=1e-12)
    out = " ".join(proc.stdout.split())
    assert out.find(f"ab: {sq['decision']} — {n // 2} launch pairs") < out.find("each run")
    # AND while it ran, one plain line per launch pair but the last (piped: no live line), saying where it stood
    looks = [ln for ln in proc.stderr.splitlines() if ln.startswith("ab: ") and " launch pair" in ln]
    assert len(looks) == n // 2 - 1 and looks[0].startswith("ab: 1 launch pair, output tok/s ")
    assert looks[-1].endswith(f"({n - 2} of 12 launches)")

"""A switchback run's token gaps by arm, on the committed real runs (traces/samples/tiny-cpu-switchback, -sequential).

GIVEN the committed switchback runs, recorded by ``expo-prof record`` on the real vLLM CPU server with the built-in
load (their workload.json older than ``requests[].start_wall_ns``: placed by ``window_ns[0] + start_s``)
WHEN ``analyze --json`` and ``compare RUN`` read them
THEN ``runs[].arrival`` is the plain re-computation's (tests/support/arrival_recompute.py: json, bisect, statistics)
per arm — gaps, mean, near-zero share, p50, p99, max — and the gaps left out, neither run's tokens arrive in
bursts, and the switchback block prints each arm's ``token gaps`` row; a copy whose workload.json cannot be placed
on the wall clock is not measurable, silently: no key, no row, no warning more.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.arrival_recompute import recompute  # type: ignore[import-not-found]  (tests/ is on sys.path)

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "traces" / "samples"


def cli(*args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.parametrize("name", ["tiny-cpu-switchback", "tiny-cpu-sequential"])
def test_arrival_by_arm_is_the_plain_recomputation(name):
    run = SAMPLES / name
    (log,) = (run / "overlay").glob("expo-prof-events-*.jsonl")
    want = recompute(run / "workload.json", log)
    doc = json.loads(cli("analyze", str(run), "--json").stdout)
    got = doc["recordings"][0]["arrival"]
    # THEN measured, both arms, each the re-computation's figures
    assert got["measured"] is True and want["measured"] is True
    assert [a["name"] for a in got["arms"]] == ["off", "on"] and set(want["arms"]) == {"off", "on"}
    for a in got["arms"]:
        w = want["arms"][a["name"]]
        assert a["gaps"] == w["gaps"] >= 100
        assert a["near_zero_share"] == pytest.approx(w["near_zero_share"], abs=1e-12)
        for k in ("mean_ms", "p50_ms", "p99_ms", "max_ms"):
            assert a[k] == pytest.approx(w[k], rel=1e-9), k
        assert a["near_zero_ms"] == pytest.approx(0.05 * w["mean_ms"], rel=1e-9)
    # AND every measured gap is counted once: by arm, or left out (no step ran, or a block's first step)
    assert (got["outside"], got["washout"]) == (want["outside"], want["washout"])
    wl = json.loads((run / "workload.json").read_text())
    total = sum(len(r["itl_s"]) for r in wl["requests"] if r["ok"] and not r["warmup"])
    assert sum(a["gaps"] for a in got["arms"]) + got["outside"] + got["washout"] == total
    # AND neither arm's tokens arrive in bursts: the real runs' arms differ far less than the rule's 25 points
    assert want["bursty"] == "" and got["bursts"] is False and got["flags"] == []
    assert got["statement"].startswith("tokens arrive alike: ")


def test_the_switchback_block_prints_each_arms_token_gaps():
    run = SAMPLES / "tiny-cpu-switchback"
    (log,) = (run / "overlay").glob("expo-prof-events-*.jsonl")
    want = recompute(run / "workload.json", log)["arms"]
    out = cli("compare", str(run)).stdout
    rows = {line.split("  ")[0]: " ".join(line.split()) for line in out.splitlines() if line.startswith("token gaps")}
    assert set(rows) == {"token gaps, engine as shipped", "token gaps, overlay"}
    off, on = rows["token gaps, engine as shipped"], rows["token gaps, overlay"]
    # THEN each row holds its arm's p50, near-zero share and gaps (the sample's: 18.62 ms / 13.49 ms)
    assert f"{want['off']['p50_ms']:.2f} ms p50" in off and f"{want['off']['gaps']} gaps (off blocks)" in off
    assert f"{want['on']['p50_ms']:.2f} ms p50" in on and f"{want['on']['gaps']} gaps (on blocks)" in on
    assert f"{100 * want['on']['near_zero_share']:.1f}% near zero" in on
    # AND no burst row: the flag does not stand
    assert "tokens arrive in bursts" not in out


def test_a_workload_without_a_wall_clock_anchor_is_not_measurable_silently(tmp_path):
    run = tmp_path / "tiny-cpu-switchback"
    shutil.copytree(SAMPLES / "tiny-cpu-switchback", run)
    (run / "analysis.json").unlink()
    wl = json.loads((run / "workload.json").read_text())
    assert all("start_wall_ns" not in r for r in wl["requests"])
    wl["window_ns"] = None  # what an interrupted run of an older expo-prof kept: no anchor at all
    (run / "workload.json").write_text(json.dumps(wl))
    before = json.loads(cli("analyze", str(SAMPLES / "tiny-cpu-switchback"), "--json").stdout)
    doc = json.loads(cli("analyze", str(run), "--json").stdout)
    # THEN no arrival, the saving unchanged, and not one warning or info line more
    assert doc["recordings"][0]["arrival"] is None
    assert doc["recordings"][0]["savings"] == before["recordings"][0]["savings"]
    assert len(doc["warnings"]) == len(before["warnings"]) and len(doc["info"]) == len(before["info"])
    out = cli("compare", str(run)).stdout
    assert "token gaps" not in out and "not measurable" not in out


def test_the_block_says_the_flag_when_an_arm_arrives_in_bursts():
    """GIVEN the sample's saving and token gaps by arm in which the on blocks' tokens come in bursts (40 % of their
    gaps near zero) WHEN the switchback block is printed THEN it says so, in the flag's words, with the reason."""
    import numpy as np
    from rich.console import Console

    from expo_prof.analysis.saving.arrival import switchback_arrival
    from expo_prof.pipeline import run as pipeline_run
    from expo_prof.terminal.saving import saving_table

    (sv,) = pipeline_run([SAMPLES / "tiny-cpu-switchback"]).document.recordings[0].savings
    n = 150
    phase = np.array(["off"] * n + ["on"] * n, dtype=object)
    start = np.arange(2 * n, dtype=np.int64) * 20_000_000
    gaps_ms = np.r_[np.full(n, 20.0), np.zeros(60), np.full(90, 24.0)]
    arr = switchback_arrival(start + 1_000_000, gaps_ms / 1e3, start, start + 20_000_000, phase,
                             np.zeros(2 * n, dtype=bool))
    con = Console(width=400, record=True, color_system=None)
    con.print(saving_table(sv, arrival=arr))
    text = con.export_text()
    (row,) = [" ".join(line.split()) for line in text.splitlines() if line.startswith("tokens arrive in bursts")]
    assert row.startswith("tokens arrive in bursts on blocks 40.0 % of the on arm's gaps are near zero (under 5 % "
                          "of its mean gap, 720.0 µs) against 0.0 % of the off arm's — a change in how tokens arrive, "
                          "not a speed-up")
    assert row.endswith("the saving is the steps' cadence, which bursts do not move")
    assert "token gaps, overlay 24.00 ms p50; p99 24.00 ms, 40.0% near zero" in " ".join(text.split())

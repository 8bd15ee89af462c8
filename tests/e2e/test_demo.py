"""``expo-prof demo``, the README's main-job command, run as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: The console script, as a user runs it (installed next to this Python).
EXPO_PROF = [str(Path(sys.executable).parent / "expo-prof")]


def _run(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run(
        [*EXPO_PROF, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def test_bad_option_is_one_line_and_exit_2(tmp_path):
    """GIVEN an out-of-range --max-tokens WHEN running demo THEN exit 2 with a
    usage error and no traceback, and no server was started (no run dir)."""
    res = _run(["demo", "--max-tokens", "0"], tmp_path, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "--max-tokens" in res.stderr
    assert not (tmp_path / "traces").exists()


@pytest.mark.server
def test_demo_serves_and_summarises_the_event_log(tmp_path, vllm_available, vllm_lock):
    """GIVEN a fresh directory WHEN `expo-prof demo` runs (tiny model, real
    vLLM CPU server, overlay on) THEN it exits 0, creates traces/<UTC>-demo/
    with the event log, the server log and requests.json, and prints the
    summary whose step count equals the number of step lines in the log."""
    with vllm_lock():
        res = _run(["demo", "--max-tokens", "8"], tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    runs = sorted((tmp_path / "traces").glob("*-demo"))
    assert len(runs) == 1
    run = runs[0]
    logs = sorted(run.glob("expo-prof-events-*.jsonl"))
    assert logs and (run / "vllm-server.log").is_file()
    reqs = json.loads((run / "requests.json").read_text())
    assert all(len(r["tokens"]) == 8 for r in reqs)
    steps = sum(json.loads(line)["type"] == "step" for p in logs for line in p.read_text().splitlines() if line.strip())
    out = res.stdout
    assert "steps (forward passes)" in out
    line = next(ln for ln in out.splitlines() if "steps (forward passes)" in ln)
    assert str(steps) in line.split()
    assert "seeded request sent twice" in out and "identical" in out
    assert "Traceback" not in res.stderr

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


def _run(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run([*EXPO_PROF, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_bad_option_is_one_line_and_exit_2(tmp_path):
    """GIVEN an out-of-range --output-len WHEN running demo THEN exit 2 with a
    usage error and no traceback, and no server was started (no run dir)."""
    res = _run(["demo", "--output-len", "0"], tmp_path, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "--output-len" in res.stderr
    assert not (tmp_path / "traces").exists()


@pytest.mark.server
def test_demo_records_the_tiny_model_and_reports(tmp_path, vllm_available, vllm_lock):
    """GIVEN a fresh directory WHEN `expo-prof demo` runs (tiny model, real
    vLLM CPU server, overlay on, torch profiler) THEN it exits 0, creates one
    traces/<UTC>-demo/ run directory with manifest, event log, profiler trace
    and workload, and ends with the analysis summary of that run."""
    with vllm_lock():
        res = _run(["demo", "--num-prompts", "4", "--output-len", "16"], tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    runs = sorted((tmp_path / "traces").glob("*-demo"))
    assert len(runs) == 1
    run = runs[0]
    m = json.loads((run / "manifest.json").read_text())
    assert m["status"] == "ok" and m["overlay"] == "on"
    assert list((run / "overlay").glob("expo-prof-events-*.jsonl"))
    assert list((run / "profiler").glob("rank*.pt.trace.json.gz"))
    assert json.loads((run / "workload.json").read_text())["metrics"]["total_output_tokens"] == 4 * 16
    analysis = json.loads((run / "analysis.json").read_text())
    assert analysis["summary"]["instances"] >= 16
    out = res.stdout
    assert "Hidden vs exposed time" in out and str(run.name) in out.replace("\n", "")
    assert "Traceback" not in res.stderr

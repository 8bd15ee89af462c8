"""``expo-prof demo``, the README's main-job command, run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


HEADLINE = re.compile(r"\d+ instances?, [\d.]+ % hidden; critical path (?:–|-?[\d.]+ (?:ns|µs|ms|s))/step")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
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


def test_demo_in_a_terminal_records_a_complete_run_and_reports(tmp_path, vllm_available, vllm_lock):
    """GIVEN a fresh directory and a terminal WHEN `expo-prof demo` runs as a user runs it (tiny model, real vLLM
    CPU server, overlay on, torch profiler) THEN the person sees, in order: waiting for the server, the server
    ready, the workload, where the run is and the analysis headline; it exits 0 and creates one traces/<UTC>-demo/
    run directory that describes itself completely (manifest, server log, event log, profiler trace, workload)
    and analyses.

    (This is also `record`'s overlay-on run and its terminal status: demo is record on the built-in model, and
    one server launch proves all three — tests/record/test_record.py keeps the overlay-off run.)"""
    import pexpect

    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm-256color"}
    with vllm_lock():
        child = pexpect.spawn(EXPO_PROF[0], ["demo", "--num-prompts", "6", "--input-len", "64", "--output-len", "24"],
                              cwd=str(tmp_path), timeout=900, dimensions=(30, 120), encoding="utf-8",
                              codec_errors="replace", env=env)
        child.expect(pexpect.EOF)
        child.close()
    out = ANSI.sub("", child.before or "")
    assert child.exitstatus == 0, out[-3000:]
    runs = sorted((tmp_path / "traces").glob("*-demo"))
    assert len(runs) == 1
    run = runs[0]
    # THEN the status came in order, and the run's tables end with the headline
    flat = out.replace("\r", "")
    order = [flat.find("waiting for the server"), flat.find("server ready at"), flat.find("workload: 6 prompts"),
             flat.find("run:"), flat.find("Hidden vs exposed time")]
    assert all(i >= 0 for i in order) and order == sorted(order), (order, flat[-3000:])
    assert HEADLINE.search(flat) and run.name in flat.replace("\n", "") and "Traceback" not in flat
    # AND the run directory describes itself completely
    m = json.loads((run / "manifest.json").read_text())
    assert m["status"] == "ok" and m["overlay"] == "on" and m["exit"]["leftover_pids"] == []
    assert m["versions"]["vllm"] and m["versions"]["torch"] and m["device"] == "cpu"
    assert m["env_changed"]["EXPO_PROF_ASYNC_EXPONENTIAL"] == "1"
    assert "--profiler-config" in m["launched_argv"]
    assert (run / "server.log").stat().st_size > 0
    metrics = json.loads((run / "workload.json").read_text())["metrics"]
    assert metrics["completed"] == 6 and metrics["total_output_tokens"] == 6 * 24
    assert list((run / "profiler").glob("rank*.pt.trace.json.gz"))
    (log,) = (run / "overlay").glob("expo-prof-events-*.jsonl")
    assert sum(1 for line in log.read_text().splitlines() if '"type":"step"' in line) >= 24
    # AND its analysis (the same as `analyze` gives) finds the draws with hidden + exposed = total
    analysis = json.loads((run / "analysis.json").read_text())
    again = subprocess.run([*EXPO_PROF, "analyze", str(run), "--json"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)["summary"]
    assert summary == analysis["summary"] and summary["instances"] >= 24
    assert summary["hidden_ns"] + summary["exposed_ns"] == summary["total_ns"] > 0

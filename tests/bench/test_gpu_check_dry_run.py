"""bench/gpu_check.sh passes its own dry run here (GPU_CHECK_DRY_RUN=1: the CPU, the FAKE device module).

The device check runs on a lent GPU machine only (none is lent to most tasks), so the script
itself — its steps, the lane checks and their sabotaged runs, the offline analysis of the trace it
writes, what it leaves in $OUT for the device tool to bring back — is checked here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared_paths import REPO

# Each dry run installs into a fresh venv and starts interpreters importing torch (docs/testing.md, "Tiers").
pytestmark = pytest.mark.procs

#: What the device tool brings back: at most 8 files, no more than 2 folders down.
MAX_FILES = 8


def _dry_run(out: Path, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPU_CHECK_DRY_RUN": "1", "OUT": str(out), "PYTHON": sys.executable, **(extra_env or {})}
    return subprocess.run(["bash", str(REPO / "bench" / "gpu_check.sh")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check-out")
    return out, _dry_run(out)


def test_the_dry_run_passes_and_leaves_what_the_device_tool_brings_back(dry_run):
    # GIVEN the dry run of the device check WHEN it ran THEN every step passed
    out, proc = dry_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = (out / "summary.txt").read_text()
    assert "DRY RUN" in summary and "all steps ok" in summary and "FAIL " not in summary
    # AND $OUT holds at most 8 plain files, none deeper than two folders
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) <= MAX_FILES and all(len(p.relative_to(out).parts) <= 3 for p in files)
    assert {p.name for p in files} >= {"summary.txt", "env.txt", "lane-checks.json", "analysis.json",
                                        "analysis-eventlog.json", "logs.tar.gz"}


def test_every_lane_check_passed_and_every_sabotage_was_caught(dry_run):
    # GIVEN the dry run's lane checks
    out, _ = dry_run
    report = json.loads((out / "lane-checks.json").read_text())
    # THEN each check passed on the FAKE device ...
    assert set(report["checks"]) == {"tokens_equal_inline", "allocator_reuse", "flashinfer_launches_nothing", "q_memory"}
    assert all(r["ok"] for r in report["checks"].values()), report["checks"]
    # ... and without the consumer's wait_event / without record_stream its check failed
    caught = {name: r["caught"] for s in report["sabotage"].values() for name, r in s.items()}
    assert caught == {"tokens_equal_inline": True, "allocator_reuse": True}


def test_the_trace_it_writes_is_analysed(dry_run):
    # GIVEN the dry run's analysis of the profiler trace and event log of its overlay steps
    out, _ = dry_run
    trace = json.loads((out / "analysis.json").read_text())["summary"]
    log = json.loads((out / "analysis-eventlog.json").read_text())["summary"]
    # THEN the five draws were found in both
    assert trace["instances"] == 5 and log["instances"] == 5


def test_a_missing_package_fails_the_check_and_names_it(tmp_path):
    # GIVEN msgspec unimportable (the GPU image before make gpu-check-wheels): a FAKE msgspec that raises
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "msgspec.py").write_text("raise ImportError('FAKE: msgspec is not installed here')\n")
    out = tmp_path / "out"
    # WHEN the dry run runs
    proc = _dry_run(out, {"PYTHONPATH": str(blocker)})
    # THEN it fails (exit 1), and the summary names the missing import and the failed analysis
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = (out / "summary.txt").read_text()
    assert "FAIL  env" in summary and "msgspec: MISSING" in summary and "FAIL  analyze" in summary
    assert "SOME STEPS FAILED" in summary

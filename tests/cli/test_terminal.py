"""What a person sees in a terminal: progress while reading, status while recording, then the result.

The CLI runs under a real pseudo-terminal (pexpect), so rich draws its
progress bar and status lines as it would for a user — unlike the other tests,
whose output is piped.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect

REPO = Path(__file__).resolve().parents[2]
HEADLINE = re.compile(r"\d+ instances?, [\d.]+ % hidden; critical path (?:–|-?[\d.]+ (?:ns|µs|ms|s))/step")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def spawn(args: list[str], timeout: float, **env: str):
    child = pexpect.spawn(sys.executable, ["-m", "expo_prof", *args], cwd=str(REPO), timeout=timeout,
                          dimensions=(30, 100), encoding="utf-8", codec_errors="replace",
                          env={**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color", **env})
    return child


def screen(child) -> str:
    child.expect(pexpect.EOF)
    child.close()
    return ANSI.sub("", child.before or "")


def test_analyze_shows_progress_then_the_headline(realtraces):
    """GIVEN a real 72 MB trace analysed in a terminal (progress threshold lowered to show the bar)
    WHEN it runs THEN the reading progress bar is drawn, then the tables end with the headline; with
    --no-progress no bar is drawn, and the figures are the same."""
    path = realtraces / "vllm-cpu/rank0-default-with-stack.pt.trace.json.gz"
    child = spawn(["analyze", str(path)], 300, EXPO_PROF_PROGRESS_MIN_BYTES="1")
    out = screen(child)
    assert child.exitstatus == 0, out[-2000:]
    assert "reading traces" in out and re.search(r"\d+(\.\d+)?/\d+(\.\d+)? MB", out)
    heads = HEADLINE.findall(out)
    assert heads and "Traceback" not in out
    quiet = spawn(["--no-progress", "analyze", str(path)], 300, EXPO_PROF_PROGRESS_MIN_BYTES="1")
    out2 = screen(quiet)
    assert quiet.exitstatus == 0 and "reading traces" not in out2 and HEADLINE.findall(out2) == heads


# record's status as it goes, in a terminal: tests/e2e/test_demo.py (demo is record on the built-in model).

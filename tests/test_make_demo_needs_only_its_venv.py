"""``make demo`` needs only its venv (issue 42, item 8): no apt, no root; the test tools come with ``make test``.

GIVEN the Makefile WHEN make prints what ``demo`` and ``test`` would run from a machine with nothing installed
(``make -n -B``: every target out of date) THEN demo's commands build the venv and run the demo, and none of them
calls apt-get (Chromium and strace are only the tests'); test's commands install both.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _plan(target: str) -> str:
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    proc = subprocess.run(["make", "-n", "-B", target], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_demo_runs_no_apt():
    plan = _plan("demo")
    assert "pip install" in plan and "expo-prof demo" in plan
    assert "apt-get" not in plan and "chromium" not in plan and "strace" not in plan


def test_the_tests_install_their_tools():
    plan = _plan("test")
    assert "apt-get" in plan and "install -y -qq chromium" in plan and "install -y -qq strace" in plan

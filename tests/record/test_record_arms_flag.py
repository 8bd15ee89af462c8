"""``--arms`` of ``record`` and ``ab``: three-arm switchback from the command line, bad values refused first.

GIVEN the real CLI (a subprocess) WHEN ``--arms`` is given a value it does not take, or without switchback
THEN one error line and exit status 2, before any server or run directory exists.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(("args", "message"), [
    (["record", "--overlay", "switchback", "--arms", "off,native"],
     "error: --arms 'off,native' is not allowed; use off,on or off,on,native"),
    (["record", "--overlay", "on", "--arms", "off,on,native"], "error: --arms only applies with --overlay switchback"),
    (["ab", "--arms", "off,on,native"], "error: --arms only applies with --switchback"),
])
def test_bad_arms_are_one_line_errors_before_anything_runs(tmp_path, args, message):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "expo_prof", *args, "-o" if args[0] == "record" else "--out",
                           str(out), "--", "vllm", "serve", "m"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip() == message
    assert "Traceback" not in proc.stderr and not out.exists()

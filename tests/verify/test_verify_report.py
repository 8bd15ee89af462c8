"""`expo-prof report` adds the verify section when a session directory holds a verify.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "traces" / "samples" / "tiny-cpu-off-on"
EXPO_PROF = [str(Path(sys.executable).parent / "expo-prof")]


def test_report_shows_the_verify_verdict(tmp_path):
    """GIVEN the sample off/on session with a verify.json (a `differs` verdict, with markup-like text) WHEN
    `expo-prof report SESSION` runs THEN exit 0, the page holds the verify section with the escaped verdict
    and check rows, and the terminal prints the verdict line; a foreign verify.json is ignored."""
    session = tmp_path / "session"
    shutil.copytree(SAMPLE, session)
    doc = {"schema_name": "expo-prof.verify", "schema": 1,
           "verdict": {"verdict": "differs", "exit_code": 1, "differences": ["greedy: <b>1</b>"],
                       "line": "differs: greedy: 1 of 8 requests <b>gave</b> other token ids"},
           "checks": {"greedy": {"status": "differs", "compared": 8, "identical": 7, "mismatches": []}},
           "accuracy": None}
    (session / "verify.json").write_text(json.dumps(doc))
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    res = subprocess.run([*EXPO_PROF, "report", str(session), "-o", str(tmp_path / "r.html")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "r.html").read_text()
    assert '<section id="verify"' in page and "7/8 identical" in page
    assert "&lt;b&gt;gave&lt;/b&gt;" in page and "<b>gave</b>" not in page
    assert "verify: differs: greedy: 1 of 8" in res.stdout
    (session / "verify.json").write_text(json.dumps({"schema_name": "something-else"}))
    res = subprocess.run([*EXPO_PROF, "report", str(session), "-o", str(tmp_path / "r.html")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and '<section id="verify"' not in (tmp_path / "r.html").read_text()

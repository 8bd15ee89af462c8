"""An answer names the load it was measured under (issue 39, item 4), in every place it is printed.

GIVEN the committed sequential switchback sample (a real vLLM CPU run), copied with a host load average written
into its manifest as ``record`` writes it (``switchback.stopped.loadavg``: min, mean, max)
WHEN analyze and compare read it
THEN the JSON's ``measured_under``, the saving line's end and the terminal table's "measured under" row name
the requests in flight (the manifest's workload), the mean batch of the compared steps (worked out from the
JSON's batch shapes) and the load average's range; and the table says a decision carries across runs only in
sign. A recording without a saving has no such words.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "traces" / "samples" / "tiny-cpu-sequential"


def cli(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "expo_prof", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def run(tmp_path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(SAMPLE, dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["switchback"]["stopped"]["loadavg"] = [1.25, 1.6, 2.5]
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst


def test_the_answer_names_its_load(run):
    doc = json.loads(cli("analyze", str(run), "--json"))
    entry = doc["recordings"][0]
    sv = entry["savings"][0]
    steps = sum(sh["baseline_steps"] + sh["arm_steps"] for sh in sv["shapes"])
    batch = sum(sh["reqs"] * (sh["baseline_steps"] + sh["arm_steps"]) for sh in sv["shapes"]) / steps
    in_flight = json.loads((run / "manifest.json").read_text())["workload"]["num_prompts"]
    want = f"{in_flight} requests in flight, batch {batch:.1f} requests on average, host load average 1.25–2.5"
    assert entry["measured_under"] == want
    assert entry["saving_line"].endswith(f"; measured under {want}")
    table = " ".join(cli("analyze", str(run)).split())
    assert f"measured under {want}; the size holds for this load; across runs only its sign carries" in table
    assert want in " ".join(cli("compare", str(run)).split())


def test_no_saving_no_load_words():
    doc = json.loads(cli("analyze", str(REPO / "traces" / "samples" / "tiny-cpu-off-on"), "--json"))
    assert all(r["measured_under"] == "" and "measured under" not in r["saving_line"] for r in doc["recordings"])

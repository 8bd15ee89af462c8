"""``expo-prof verify --off-url --on-url`` through the real CLI against two STAND-IN OpenAI-style servers.

The stand-ins (``tests/support/openai_standin.py``, real HTTP servers with known answers; no vLLM) sample one
fixed distribution; unseeded samples come from each stand-in's request counter, so two correct stand-ins give
the same samples and the verdict is certain. The faults are the stand-in's own: top-k ignored, or every
completion refused after the N-th.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.openai_standin import MODEL, StandIn  # type: ignore[import-not-found]  (tests/ is on sys.path)

REPO = Path(__file__).resolve().parents[2]
EXPO_PROF = [str(Path(sys.executable).parent / "expo-prof")]
#: 4 prompts × 3 greedy tokens, 40 samples per setting in requests of 10, position 1 only.
BUDGET = ["--samples", "40", "--per-request", "10", "--greedy-tokens", "3", "--positions", "1", "--concurrency", "2"]


def _verify(off: StandIn, on: StandIn, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    return subprocess.run([*EXPO_PROF, "verify", "--off-url", off.base_url, "--on-url", on.base_url + "/v1",
                           *BUDGET, "--out", str(out)], cwd=out.parent, env=env, capture_output=True, text=True,
                          timeout=300)


def test_two_equal_servers_are_equivalent(tmp_path):
    """GIVEN two correct stand-ins WHEN verified THEN exit 0, both sides complete with the listed model, greedy
    ids all the most likely token, the processed-logprobs probe seen, and every sampled first token allowed."""
    with StandIn() as off, StandIn() as on:
        res = _verify(off, on, tmp_path / "s")
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((tmp_path / "s" / "verify.json").read_text())
    assert doc["status"] == "ok" and doc["verdict"]["verdict"] == "equivalent"
    for label in ("off", "on"):
        side = doc["sides"][label]
        assert side["complete"] and side["model"] == MODEL and side["processed_logprobs"] is True
        assert side["greedy_alone"] == [[0, 0, 0]] * 4
        assert all(len(v["tokens"]) == 40 for v in side["samples"].values())
    # every completion carried verify's defaults and the model the listing named
    bodies = [b for _, p, b in on.requests if p == "/v1/completions"]
    assert bodies and all(b["model"] == MODEL and b["ignore_eos"] and b["return_token_ids"] for b in bodies)
    assert doc["checks"]["constraints"]["on"]["status"] == "ok"


def test_a_server_ignoring_top_k_differs(tmp_path):
    """GIVEN an on stand-in that samples as if top-k were not asked WHEN verified THEN exit 1 and the constraint
    check names first tokens outside the allowed set."""
    with StandIn() as off, StandIn(ignore_top_k=True) as on:
        res = _verify(off, on, tmp_path / "s")
    assert res.returncode == 1, res.stderr[-3000:]
    doc = json.loads((tmp_path / "s" / "verify.json").read_text())
    assert any(d.startswith("constraints:") for d in doc["verdict"]["differences"])


def test_a_server_refusing_mid_run_keeps_what_was_collected(tmp_path):
    """GIVEN an on stand-in that refuses every completion after its 5th with HTTP 500 WHEN verified THEN exit 3
    with one error line quoting the refusal, and verify.json keeps the off side and the on side's first answers."""
    with StandIn() as off, StandIn(fail_after=5) as on:
        res = _verify(off, on, tmp_path / "s")
    assert res.returncode == 3, res.stderr[-3000:]
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "answered HTTP 500 to POST /v1/completions: engine core died" in errors[0]
    assert "Traceback" not in res.stderr
    doc = json.loads((tmp_path / "s" / "verify.json").read_text())
    assert doc["status"] == "failed" and doc["sides"]["off"]["complete"]
    on_side = doc["sides"]["on"]
    assert not on_side["complete"] and "HTTP 500" in on_side["error"] and len(on_side["greedy_alone"]) == 3

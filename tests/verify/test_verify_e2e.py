"""``expo-prof verify`` against REAL vLLM CPU servers on the tiny model, as a user runs it.

* URL mode, a correct overlay (equivalent, exit 0): the session's shared overlay-off / overlay-on pair
  (``off_on_session``, tests/support/off_on.py), which also serves the overlay's end-to-end tests.
* URL mode, a broken sampler: an overlay-OFF server and an overlay-ON one whose greedy rows are sampled AND
  which ignores top-k (exit 1; each fault must be named by its own check, which looks only at the requests
  that fault touches). The faults come from the TEST-ONLY plugin in ``tests/verify/broken_sampler`` (a
  ``vllm.general_plugins`` entry point found only through this test's PYTHONPATH; it acts only with the
  overlay on).
* command mode: ``verify -- CMD`` whose server dies mid-run (exit 3, what was collected kept in verify.json).

Budgets are small (--samples 300): the breaks are large. The equivalence case uses
--alpha 0.001 so a correct overlay fails it by chance once in a thousand runs,
not once in twenty.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from overlay.contract import ENV_SWITCH
from support.off_on import VERIFY_BUDGET as BUDGET
from support.off_on import pythonpath as _pythonpath
from support.off_on import verify_cli as _verify
from support.started import started

PLUGIN_DIR = Path(__file__).resolve().parent / "broken_sampler"


@pytest.fixture(scope="module")
def servers(vllm_available, tiny_model, vllm_lock, tmp_path_factory):
    """``start((overlay, fault), …)`` → running servers, started at once (context manager); the server lock
    held for the module."""
    from expo_prof.serving.launch import VllmServer

    logs = tmp_path_factory.mktemp("verify-logs")
    count = [0]

    def server(overlay: bool, fault: str | None = None) -> VllmServer:
        count[0] += 1
        env = {ENV_SWITCH: "1" if overlay else "0", "EXPO_PROF_OUT": str(logs / f"overlay-{count[0]}"),
               "PYTHONPATH": _pythonpath(PLUGIN_DIR), "EXPO_PROF_TEST_BROKEN_SAMPLER": fault}
        # A long startup limit: on a loaded 2-core CI machine a start has taken over 5 minutes.
        return VllmServer(tiny_model, env=env, log_path=logs / f"server-{count[0]}.log", startup_timeout=900,
                          extra_args=["--logprobs-mode", "processed_logprobs"])

    def start(*configs: tuple[bool, str | None]):
        return started(*(server(*c) for c in configs))

    with vllm_lock(timeout_s=1800):
        yield start


def _urls(off, on) -> list[str]:
    return ["--off-url", off.base_url, "--on-url", on.base_url]


def test_overlay_off_vs_on_is_equivalent(off_on_session):
    """GIVEN a correct overlay-on server beside an overlay-off one WHEN verify runs against both, with an accuracy
    set THEN exit 0, every check ok, the verdict states the detectable total variation, and the JSON (stdout and
    verify.json in the session directory) is schema 1 with the accuracy difference and its CI."""
    res = off_on_session.verify
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["schema_name"] == "expo-prof.verify" and doc["schema"] == 1
    c = doc["checks"]
    assert c["greedy"]["status"] == "ok" and c["greedy"]["compared"] == 8
    assert c["seeded"]["repeatable_on"] is True
    assert c["distribution"]["status"] == "ok" and len(c["distribution"]["tests"]) == 10
    assert 0 < c["distribution"]["detectable_tv"] < 0.5
    assert c["constraints"]["on"]["status"] == "ok" and c["constraints"]["on"]["processed_logprobs"] is True
    assert c["sanity"]["on"]["status"] == "ok" and c["sanity"]["on"]["vocab_size"] > 256
    acc = doc["accuracy"]
    assert acc["n"] == 4 and acc["ci_low"] <= acc["diff"] <= acc["ci_high"]
    assert doc["verdict"]["verdict"] == "equivalent" and "total variation" in doc["verdict"]["line"]
    saved = json.loads((off_on_session.verify_dir / "s" / "verify.json").read_text())
    assert saved["verdict"] == doc["verdict"]


def test_broken_sampler_is_caught(servers, tmp_path):
    """GIVEN an overlay-on server with a deliberately broken sampler — greedy rows sampled, and top-k ignored —
    beside an overlay-off one WHEN verify runs THEN exit 1, the verdict says differs, and each fault is named
    by its own check: greedy ids differ; first tokens outside the top-k set (with the overlay on only) and the
    top-k distribution rejected."""
    with servers((False, None), (True, "greedy,topk")) as (off, on):
        res = _verify([*_urls(off, on), *BUDGET, "--json", "--out", str(tmp_path / "s")], tmp_path)
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["verdict"]["verdict"] == "differs"
    heads = {d.split(":")[0] for d in doc["verdict"]["differences"]}
    assert {"greedy", "constraints"} <= heads
    assert doc["checks"]["greedy"]["status"] == "differs"
    con = {r["config"]: r for r in doc["checks"]["constraints"]["on"]["per_config"]}
    assert con["top-k 5"]["outside_allowed_first"] > 0 and con["T=1"]["outside_allowed_first"] == 0
    assert doc["checks"]["constraints"]["off"]["status"] == "ok"
    assert doc["checks"]["constraints"]["on"]["processed_logprobs"] is True  # the probe does not use top-k
    top_k_tests = [t for t in doc["checks"]["distribution"]["tests"] if t["config"] == "top-k 5"]
    assert any(t["significant"] for t in top_k_tests)
    plain = [t for t in doc["checks"]["distribution"]["tests"] if t["config"] == "T=1"]
    assert plain and not any(t["p"] < 1e-6 for t in plain)  # what top-k does not touch stays alike


def test_server_dying_mid_run_keeps_partial_results(vllm_available, tiny_model, servers, tmp_path):
    """GIVEN `verify -- CMD` whose vLLM engine exits at its 60th sampler call WHEN verify runs THEN exit 3 with
    one error line and no traceback, and verify.json in the session directory holds status failed, the error
    and the answers collected before the crash."""
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model), "--port",
            str(_free_port()), "--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]
    from expo_prof.serving.launch import DEFAULT_ENV

    env = {**DEFAULT_ENV, "PYTHONPATH": _pythonpath(PLUGIN_DIR), "EXPO_PROF_TEST_BROKEN_SAMPLER": "die",
           "EXPO_PROF_TEST_BROKEN_AFTER": "60"}
    res = _verify([*BUDGET, "--out", str(tmp_path / "s"), "--", *argv], tmp_path, env=env)
    assert res.returncode == 3, res.stdout[-3000:] + res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "error:" in res.stderr
    doc = json.loads((tmp_path / "s" / "verify.json").read_text())
    assert doc["status"] == "failed" and doc["error"]
    off = doc["sides"]["off"]
    assert off["complete"] is False and len(off["greedy_alone"]) >= 1 and off["error"]
    assert doc["sides"]["on"] is None  # the session stopped at the failed run
    assert json.loads((tmp_path / "s" / "01-off" / "manifest.json").read_text())["status"] in ("crashed", "failed")


def _free_port() -> int:
    from expo_prof.serving.launch import free_port

    return free_port()

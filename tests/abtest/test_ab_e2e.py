"""A real small A/B: `expo-prof ab` drives a vLLM CPU server on the tiny model, off/on/off/on, and judges it.

GIVEN the tiny random-weight Llama and a real vLLM CPU server command WHEN
``expo-prof ab --repeat 2`` runs with a tiny workload THEN it records four
runs in alternating order, prints the tables and a verdict that states its
uncertainty, and the JSON's numbers are the recorded runs' own numbers.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from ab_helpers import run_cli  # type: ignore[import-not-found]

from expo_prof.serving.launch import free_port

pytestmark = pytest.mark.server

ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def test_ab_on_the_cpu_server(tiny_model, vllm_available, vllm_lock, tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    port = free_port()
    session = tmp_path / "session"
    server = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model),
              "--dtype", "float32", "--max-model-len", "256", "--port", str(port), "--enforce-eager"]
    with vllm_lock():
        # WHEN a 2×2 A/B with a tiny built-in workload runs
        proc = run_cli("ab", "--repeat", "2", "--num-prompts", "6", "--input-len", "48", "--output-len", "24",
                       "--session-dir", str(session), "--", *server, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # THEN the session holds off, on, off, on, all ok
    s = json.loads((session / "session.json").read_text())
    assert [(r["dir"], r["overlay"], r["status"]) for r in s["runs"]] == [
        ("01-off", False, "ok"), ("02-on", True, "ok"), ("03-off", False, "ok"), ("04-on", True, "ok")]
    # AND the printed report has both tables, the why line and a verdict with its uncertainty
    out = proc.stdout
    assert "each run" in out and "change of the means" in out and "why:" in out and "verdict:" in out
    # AND the same comparison as JSON in a file, from the kept session (what `ab --json -o FILE` writes)
    saved = run_cli("compare", str(session), "--json", "-o", str(tmp_path / "ab.json"), cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    result = json.loads((tmp_path / "ab.json").read_text())
    v = result["verdict"]
    assert v["decision"] in ("enable", "keep off", "no significant difference")
    assert "95% CI" in v["statement"] and "paired t p=" in v["statement"] and "2 pairs" in v["statement"]
    assert result["design"]["paired"] is True and result["design"]["pairs"] == 2
    # AND each run's value is the one the run recorded, the means and change are computed from them
    tput = {m["name"]: m for m in result["metrics"]}["output_throughput"]
    rec = {d: json.loads((session / d / "workload.json").read_text())["metrics"]["output_throughput"]
           for d in ("01-off", "02-on", "03-off", "04-on")}
    assert tput["a"]["values"] == [rec["01-off"], rec["03-off"]]
    assert tput["b"]["values"] == [rec["02-on"], rec["04-on"]]
    mean_a, mean_b = np.mean([rec["01-off"], rec["03-off"]]), np.mean([rec["02-on"], rec["04-on"]])
    assert tput["change_pct"] == pytest.approx(100 * (mean_b - mean_a) / mean_a, rel=1e-12)
    # AND the workload is the one asked for, the same for all runs
    assert result["workload"]["num_prompts"] == 6 and result["workload"]["input_len"] == 48
    # AND the on runs' overlay logs gave the mechanism its per-step numbers
    by = {m["name"]: m for m in result["metrics"]}
    assert by["forward_us_per_step"]["b"]["n"] == 2 and by["exposed_exp_us_per_step"]["b"]["n"] == 2
    assert result["mechanism"]["available"] is True
    assert result["mechanism"]["removed_basis"].startswith(("measured", "estimated"))
    assert all((session / d / "analysis.json").is_file() for d in ("02-on", "04-on"))
    # AND compare on the kept session gives the same numbers again
    again = run_cli("compare", str(session), "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert {m["name"]: m for m in json.loads(again.stdout)["metrics"]}["output_throughput"] == tput
    assert not os.environ.get("EXPO_PROF_ASYNC_EXPONENTIAL")  # the switch never leaked into the test process

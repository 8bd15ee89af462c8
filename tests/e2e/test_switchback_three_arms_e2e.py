"""Three-arm switchback end to end: one real vLLM CPU server run, recorded and compared by the CLI.

GIVEN the tiny Llama served by vLLM's real CPU engine, recorded by
``expo-prof record --overlay switchback --arms off,on,native`` (one launch, a
short built-in load) — where no NPU exists ``native`` is vLLM CPU's sampling as
shipped (the fused Gumbel-argmax op), ``off`` its native path with the
exponential drawn inline after the forward, ``on`` the overlay (docs/overlay.md)
WHEN ``expo-prof compare RUN --json`` and ``compare RUN`` read the run
THEN the event log cycles the three arms in the documented order, only ``on``
steps launch a ``q``, and the analysis reports all three comparisons with
their confidence intervals.
"""

from __future__ import annotations

import json
import sys

from support.server_cli import expo_prof as _cli

from overlay.arms import switchback_phase
from overlay.contract import ENV_SWITCHBACK_ARMS, THREE_ARMS

K = 3


def test_three_arm_switchback_on_the_cpu_engine(vllm_available, vllm_lock, tiny_model, tmp_path):
    from expo_prof.serving.launch import free_port

    run = tmp_path / "run"
    # GIVEN / WHEN one recorded server run in three-arm switchback (blocks of 3 steps)
    with vllm_lock(timeout_s=900):
        rec = _cli("-q", "record", "--overlay", "switchback", "--arms", "native, on,off", "--block-steps", str(K),
                   "--profiler", "none", "--no-analyze", "--fixed-length", "--num-prompts", "4", "--input-len", "16",
                   "--output-len", "72", "--warmup", "1", "-o", str(run), "--",
                   sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model),
                   "--dtype", "float32", "--max-model-len", "256", "--port", str(free_port()), "--enforce-eager",
                   "--shutdown-timeout", "10")
    assert rec.returncode == 0, rec.stderr[-3000:]
    manifest = json.loads((run / "manifest.json").read_text())
    # THEN the run asked the server for the three arms, in their canonical order
    assert manifest["status"] == "ok" and manifest["env_changed"][ENV_SWITCHBACK_ARMS] == "off,on,native"
    (log,) = (run / "overlay").glob("expo-prof-events-*.jsonl")
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    header, steps = lines[0], [x for x in lines if x["type"] == "step"]
    # AND the log names the arms, and its steps cycle them in the documented order
    assert header["arms"] == list(THREE_ARMS) and header["block_steps"] == K
    sized = [s for s in steps if s["block"] is not None]
    assert [s["phase"] for s in sized] == [switchback_phase(k, K, THREE_ARMS) for k in range(len(sized))]
    # AND only on steps launched a q (and used it when their batch sampled at random); off and native never did
    assert all(not s["launched"] for s in sized if s["phase"] != "on")
    assert sum(s["used"] for s in sized if s["phase"] == "on") >= K
    # WHEN compared as JSON
    out = _cli("compare", str(run), "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    # THEN all three comparisons, each over at least two groups of blocks with a CI and a verdict
    assert [s["compared"] for s in doc["savings"]] == [["off", "on"], ["off", "native"], ["native", "on"]]
    for s in doc["savings"]:
        assert s["arms"] == list(THREE_ARMS) and s["pairs"] >= 2 and s["saving"]["ci_ns"] is not None
        assert s["decision"] in ("enable", "keep off", "no significant difference")
    assert doc["saving_line"].startswith("saving (switchback, 3 arms): on vs off: ")
    print(doc["saving_line"])  # the run's numbers, for the log (pytest -s / -rP)
    # AND the text tables name each comparison
    text = _cli("compare", str(run)).stdout
    assert "on (overlay) against off (inline draw)" in text and "on (overlay) against native (engine as shipped)" in text

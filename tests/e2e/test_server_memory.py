"""The q memory of the overlay inside a REAL vLLM CPU server, with memory profiling on.

vLLM CPU sizes its KV cache from the RSS after a warm-up ``profile_run`` (when
the model is compiled, i.e. without ``--enforce-eager``; vLLM 0.32
``cpu_worker.determine_available_memory``). The overlay's runner hook holds
the largest q (max_num_seqs x vocab) through that run, so the lane's buffer is
already that large when RSS is read: the KV budget accounts for it, and no
step makes it grow afterwards. One server start (compiled: ≈ +30 s on 2 cores).
"""

from __future__ import annotations

import json
import threading

import pytest

from overlay.contract import ENV_OUT, ENV_SWITCH, ENV_SWITCH_ALIAS, EVENT_LOG_GLOB


MAX_SEQS = 4


@pytest.fixture(scope="module")
def compiled_run(vllm_server, tmp_path_factory):
    """GIVEN a compiled vLLM CPU server (memory profiling runs) with --max-num-seqs 4 and the overlay on,
    WHEN it serves a full batch of sampled requests and a lone one, then stops."""
    out = tmp_path_factory.mktemp("events-mem")
    env = {ENV_SWITCH: "1", ENV_SWITCH_ALIAS: None, ENV_OUT: str(out)}
    with vllm_server(env=env, enforce_eager=False, extra_args=["--max-num-seqs", str(MAX_SEQS)]) as srv:
        threads = [
            threading.Thread(target=srv.completion, args=(f"prompt {i}",),
                             kwargs={"max_tokens": 8, "ignore_eos": True, "temperature": 1.0})
            for i in range(MAX_SEQS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        srv.completion("one more", max_tokens=4, ignore_eos=True, temperature=1.0)
    logs = []
    for path in sorted(out.glob(EVENT_LOG_GLOB)):
        logs.append([json.loads(line) for line in path.read_text().splitlines() if line.strip()])
    return logs


def test_profiling_holds_the_largest_q_and_no_step_exceeds_it(compiled_run):
    # THEN the worker's log ends with a summary naming the q held through profiling:
    # max_num_seqs x vocab x 4 bytes
    worker_logs = [objs for objs in compiled_run if any(o["type"] == "step" for o in objs)]
    assert worker_logs, "no event log with steps"
    for objs in worker_logs:
        summary = objs[-1]
        assert summary["type"] == "summary"
        launched = [o for o in objs if o["type"] == "step" and o["launched"]]
        assert launched, "no step launched a q"
        vocab = launched[0]["vocab"]
        assert summary["q_reserved_bytes"] == MAX_SEQS * vocab * 4
        # the largest q a step launched is the one the step lines describe, within the reserved size
        assert summary["q_max_bytes"] == max(o["rows"] * o["vocab"] * 4 for o in launched)
        assert 0 < summary["q_max_bytes"] <= summary["q_reserved_bytes"]
        # and the lane never held more than profiling saw: the KV budget accounted for it
        assert summary["q_peak_bytes"] == summary["q_reserved_bytes"]
        # nor did q occupy more memory at once (the CPU lane's one buffer; vLLM CPU has no async scheduling)
        assert summary["q_block_peak_bytes"] == summary["q_reserved_bytes"]

"""``expo-prof ab --switchback`` end to end on the real vLLM CPU server: its answer printed once, whole.

GIVEN the tiny Llama served by vLLM's real CPU engine
WHEN ``expo-prof ab --switchback`` records one switchback run (blocks of 3 steps, a short built-in load) and
prints its tables on the terminal (not quiet)
THEN the "What the overlay saves" block and the saving line appear once each (the run summary printed them;
the comparison after it did again, issue 33 item 3), the block holds its "to settle" row and every left-out
reason with what it means, and each arm's step broken into forward, sampler and the rest (item 5), the same
figures as ``compare RUN --json`` gives.
"""

from __future__ import annotations

import json
import sys

import pytest
from support.server_cli import expo_prof as _cli

K = 3


def test_ab_switchback_prints_its_block_once_with_the_step_broken_down(vllm_available, vllm_lock, tiny_model,
                                                                         tmp_path):
    from expo_prof.serving.launch import free_port
    from expo_prof.words import fmt_ns

    run = tmp_path / "run"
    # GIVEN / WHEN one ab --switchback session, its tables on the terminal
    with vllm_lock(timeout_s=900):
        ab = _cli("ab", "--switchback", "--block-steps", str(K), "--num-prompts", "4", "--input-len", "16",
                  "--output-len", "72", "--warmup", "1", "--session-dir", str(run), "--",
                  sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model),
                  "--dtype", "float32", "--max-model-len", "256", "--port", str(free_port()), "--enforce-eager",
                  "--shutdown-timeout", "10")
    assert ab.returncode == 0, ab.stderr[-3000:]
    out = ab.stdout
    flat = " ".join(out.split())
    # THEN the block and the saving line once each
    assert out.count("What the overlay saves") == 1, out
    assert flat.count("saving (switchback): ") == 1, out
    # AND the block is whole: the to-settle row, and the step of each arm as forward + sampler + rest
    assert "to settle" in flat and "forward beside the draw" not in flat
    doc = json.loads(_cli("compare", str(run), "--json").stdout)
    (sv,) = doc["saving"]
    for parts in (sv["off_parts"], sv["on_parts"]):
        assert parts["forward_ns"] + parts["sampler_ns"] + parts["rest_ns"] == pytest.approx(parts["step_ns"])
        for name in ("forward", "sampler", "rest"):
            assert f"{name} {fmt_ns(parts[name + '_ns'])}" in flat, (name, out)
    # AND every reason a step was left out is printed with its count and a clause saying what it means
    for key, n in sv["dropped"].items():
        if n:
            clause = flat.split(f"left out {n} ", 1)[1].split(" left out ")[0]
            assert len(clause.split()) >= 4, (key, clause)

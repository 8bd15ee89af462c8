"""Tensor-parallel ranks stay in lockstep whatever each rank's overlay does (overlay/rng.py).

Two real processes joined by torch.distributed (gloo on 127.0.0.1) run the same batches through
vLLM's real ``random_sample``; rank 1's overlay is switched off by an internal error partway, rank
0's lane fails once, one launched q goes unused and one step's rows do not match. Every rank must
still draw the same noise and leave torch's default generator in the same state: with async
scheduling each rank feeds its own sampled tokens back.
"""

from __future__ import annotations

import json

import pytest

from eventlog_schema import read_log
from two_ranks import run_two_ranks

# Two fresh interpreters importing torch and vLLM per test (docs/testing.md, "Tiers").
pytestmark = pytest.mark.procs


def test_ranks_draw_the_same_noise_when_one_ranks_overlay_is_off(tmp_path, vllm_available):
    # GIVEN two ranks, rank 1's overlay disabled at step 3, rank 0's lane failing at step 6
    # WHEN both run their ten steps
    run_two_ranks("lockstep_rank.py", tmp_path)
    seen = json.loads((tmp_path / "rank0.json").read_text())
    # THEN the overlay really differed between the ranks (on at rank 0, off at rank 1 from step 3) ...
    assert [(a["overlay_on"], b["overlay_on"]) for a, b in seen] == [(True, True)] * 3 + [(True, False)] * 7
    # ... and at every step both ranks sampled the same tokens and hold the same generator state
    for i, (a, b) in enumerate(seen):
        assert a["tokens"] == b["tokens"], (i, a, b)
        assert a["rng"] == b["rng"], i
    # AND rank 0 used its side-lane q after rank 1 was off (what made the comparison bite)
    _, lines = read_log(tmp_path / "log0")
    used = [s["step"] for s in lines["step"] if s["used"]]
    assert [s["fallback"] for s in lines["step"]] == [None, None, "not_consumed", None, "rows_mismatch",
                                                      None, "error", None, None, None]
    assert {3, 5, 7, 8, 9} <= set(used)
    _, lines1 = read_log(tmp_path / "log1")
    assert [n["code"] for n in lines1["notice"] if n["code"] == "disabled"] == ["disabled"]


def test_an_error_in_the_step_bookkeeping_leaves_the_random_stream_where_the_other_rank_has_it(tmp_path,
                                                                                               vllm_available):
    # GIVEN two ranks, rank 1's overlay failing inside the bookkeeping of step 5 after its q was taken
    # (nothing else goes wrong: no disable at step 3, no lane error)
    # WHEN both run their ten steps
    run_two_ranks("lockstep_rank.py", tmp_path, ["--disable-at", "-1", "--lane-error-at", "-1",
                                                 "--bookkeeping-error-at", "5"])
    seen = json.loads((tmp_path / "rank0.json").read_text())
    # THEN the error switched rank 1's overlay off at step 5 (through the guard), rank 0's stayed on ...
    assert [(a["overlay_on"], b["overlay_on"]) for a, b in seen] == [(True, True)] * 6 + [(True, False)] * 4
    _, lines1 = read_log(tmp_path / "log1")
    assert [n["code"] for n in lines1["notice"] if n["code"] == "disabled"] == ["disabled"]
    # ... and at that step and every later one both ranks sampled the same tokens from the same generator
    # state: rank 1's inline draw took the noise rank 0's q had, not the next one
    for i, (a, b) in enumerate(seen):
        assert a["tokens"] == b["tokens"], (i, a, b)
        assert a["rng"] == b["rng"], i
    _, lines0 = read_log(tmp_path / "log0")
    assert [s["used"] for s in lines0["step"]][5:] == [True] * 5

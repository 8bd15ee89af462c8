"""Pipeline parallelism: only the last stage, the one that samples, reserves q through memory profiling.

vLLM's ``profile_run`` runs its sampler on the last pipeline rank only (``_dummy_sampler_run`` under
``get_pp_group().is_last_rank``), and the runner hook launches no q on the other ranks. Two real processes
join vLLM's distributed state with two pipeline stages (gloo on 127.0.0.1) and run a profile_run under the
overlay's wrapper (tests/overlay/pp_rank.py).
"""

from __future__ import annotations

import json

import pytest

from two_ranks import run_two_ranks

# Two fresh interpreters importing torch and vLLM (docs/testing.md, "Tiers").
pytestmark = pytest.mark.procs


def test_only_the_last_pipeline_rank_reserves_q(tmp_path, tiny_config_dir, vllm_available):
    # GIVEN two pipeline ranks of vLLM's real parallel state, each with the overlay on its CPU lane
    # WHEN each runs vLLM's memory profiling under the overlay's wrapper
    run_two_ranks("pp_rank.py", tmp_path, ["--config-dir", str(tiny_config_dir)])
    first, last = (json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1))
    assert (first["last"], last["last"]) == (False, True)
    # THEN the first stage, which never samples, held no q and its summary reserves nothing ...
    assert first["held"] == 0
    assert first["summary"]["q_reserved_bytes"] == first["summary"]["q_block_peak_bytes"] == 0
    # ... while the last held the largest q (max_num_reqs 8 x vocab 96 x 4 bytes), as its summary says
    q_bytes = 8 * last["vocab"] * 4
    assert last["held"] == last["summary"]["q_reserved_bytes"] == q_bytes

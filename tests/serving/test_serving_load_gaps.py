"""The built-in load keeps what compare's token-arrival check reads: each request's inter-token gaps.

GIVEN the STAND-IN OpenAI-style server (tests/support/openai_standin.py: one streamed event per token, each after
a sleep of STREAM_GAP_S = 5 ms) WHEN the built-in load runs against it and its workload.json is read as a run
directory by compare's loader THEN the run's gaps are exactly the measured requests' (the warm-up's left out), one
per token after the first, each at least about the stand-in's sleep — so the check is measurable on a recorded
run without any change to what the load writes.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np

from expo_prof.abtest.inputs.run_dirs import load_run_dir
from expo_prof.abtest.judging.flags import arrival_stats
from expo_prof.serving.load import WorkloadSpec, run_workload
from support.openai_standin import STREAM_GAP_S, StandIn  # type: ignore[import-not-found]  (tests/ is on sys.path)


def test_workload_json_gaps_are_read_as_the_runs_gaps(tmp_path):
    spec = WorkloadSpec(num_prompts=4, input_len=4, output_len=30, warmup=1, max_concurrency=4, seed=1)
    with StandIn() as s:
        res = asyncio.run(run_workload(s.base_url, spec))
    run = tmp_path / "01-on"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"schema": 1, "status": "ok", "overlay": "on", "command": ["x"],
                                                   "started": "2026-01-01T00:00:00.000+00:00"}))
    (run / "workload.json").write_text(json.dumps(res.to_json()))
    loaded = load_run_dir(run, [])
    assert loaded is not None and loaded.itl_s is not None
    measured = [r for r in res.requests if not r.warmup]
    # THEN one gap per token after the first of each measured request (4 × 29), the warm-up's 29 left out
    assert len(loaded.itl_s) == 4 * (spec.output_len - 1)
    assert loaded.itl_s.tolist() == [g for r in measured for g in r.itl_s]
    # AND the stand-in sleeps 5 ms before each token: the decode time per gap is at least about that
    st = arrival_stats("on", loaded.itl_s)
    assert st.gaps == 116 and st.mean_ms >= 0.9 * STREAM_GAP_S * 1e3
    assert st.max_ms == np.max(loaded.itl_s) * 1e3

"""The built-in load places every token it received on the wall clock (``requests[].start_wall_ns``).

GIVEN the STAND-IN OpenAI-style server (tests/support/openai_standin.py: one streamed event per token, 5 ms apart)
WHEN the built-in load runs against it, between two readings of the wall clock
THEN every request, the warm-up's too, has its wall-clock start; the measured requests' tokens, placed by it
(start + ttft + the gaps so far), fall inside the load's window and inside the test's two clock readings, the last
token of each before its request ended; and the older files' placement — ``window_ns[0] + start_s``, what a
workload.json without the field is read by — gives the same times to well under a decode step.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np

from expo_prof.pipeline.token_gaps import measured_arrivals
from expo_prof.serving.load import WorkloadSpec, run_workload
from support.openai_standin import STREAM_GAP_S, StandIn  # type: ignore[import-not-found]  (tests/ is on sys.path)


def test_every_token_is_placed_on_the_wall_clock():
    spec = WorkloadSpec(num_prompts=3, input_len=4, output_len=12, warmup=1, max_concurrency=3, seed=2)
    before = time.time_ns()
    with StandIn() as s:
        res = asyncio.run(run_workload(s.base_url, spec))
    after = time.time_ns()
    wl = json.loads(json.dumps(res.to_json()))  # as workload.json holds it
    assert all(isinstance(r["start_wall_ns"], int) and before <= r["start_wall_ns"] <= after for r in wl["requests"])
    measured = [r for r in wl["requests"] if r["ok"] and not r["warmup"]]
    at, gaps = measured_arrivals(wl)
    # THEN one arrival per gap, each inside the load's window and the test's own clock readings
    assert len(at) == len(gaps) == 3 * (spec.output_len - 1)
    lo, hi = wl["window_ns"]
    assert lo <= at.min() and at.max() <= hi and before <= at.min() and at.max() <= after
    # AND each request's last token came before its request ended, its first gap after its first token
    k = 0
    for r in measured:
        n = len(r["itl_s"])
        last = at[k + n - 1]
        assert last <= r["start_wall_ns"] + round(r["latency_s"] * 1e9)
        assert at[k] - r["start_wall_ns"] >= round((r["ttft_s"] + r["itl_s"][0]) * 1e9) - 1
        k += n
    # AND the older placement (no start_wall_ns: window_ns[0] + start_s) agrees to well under the 5 ms decode step
    old = {**wl, "requests": [{k: v for k, v in r.items() if k != "start_wall_ns"} for r in wl["requests"]]}
    at_old, gaps_old = measured_arrivals(old)
    assert np.array_equal(gaps_old, gaps)
    assert np.max(np.abs(at_old - at)) < 0.1 * STREAM_GAP_S * 1e9

"""expo_prof.serving.load: the built-in load generator end to end against a STAND-IN OpenAI-style server.

The stand-in (``tests/support/openai_standin.py``) streams one event per token with a small gap, answers
``/tokenize`` with one id per word and reports usage; no vLLM here.
"""

from __future__ import annotations

import asyncio

import pytest

from expo_prof.serving.client import ServerError
from expo_prof.serving.launch import free_port
from expo_prof.serving.load import WARMUP_TOKENS, WorkloadError, WorkloadSpec, run_workload
from support.openai_standin import MODEL, StandIn  # type: ignore[import-not-found]  (tests/ is on sys.path)


def _run(url: str, spec: WorkloadSpec):
    return asyncio.run(run_workload(url, spec))


def test_streamed_requests_are_timed_and_counted():
    """GIVEN a stand-in and 3 measured prompts of 6 tokens → 4 tokens after one warm-up WHEN the load runs THEN
    3 completed, 12 output tokens (the usage chunks), 6 input tokens each as token-id lists from /tokenize, every
    request with a first-token time and 3 inter-token gaps, and a measured window; the warm-up asks for
    WARMUP_TOKENS only."""
    spec = WorkloadSpec(num_prompts=3, input_len=6, output_len=4, warmup=1, max_concurrency=2, seed=3)
    with StandIn() as s:
        res = _run(s.base_url + "/", spec)
    m = res.metrics()
    assert (m["completed"], m["failed"], m["total_output_tokens"], m["total_input_tokens"]) == (3, 0, 12, 18)
    measured = [r for r in res.requests if not r.warmup]
    assert all(r.ok and r.ttft_s > 0 and len(r.itl_s) == 3 and r.latency_s >= r.ttft_s for r in measured)
    sent = [b for m_, p, b in s.requests if p == "/v1/completions"]
    assert len(sent) == 4  # the warm-up and the three measured
    # the warm-up is a full-length prompt but only WARMUP_TOKENS out: it must not double a short run (issue 39)
    assert [b["max_tokens"] for b in sent] == [WARMUP_TOKENS, 4, 4, 4] and WARMUP_TOKENS < 4
    assert all(b["model"] == MODEL and b["stream"] is True and b["stream_options"] == {"include_usage": True}
               and isinstance(b["prompt"], list) and len(b["prompt"]) == 6 for b in sent)
    assert s.paths("POST")[0] == "/tokenize" and res.notes == []
    assert res.window_ns[1] > res.window_ns[0]


def test_without_tokenize_prompts_go_as_words_with_a_note():
    """GIVEN a stand-in without /tokenize (404) WHEN the load runs THEN the prompts are texts of input_len words
    and a note says the lengths are approximate."""
    spec = WorkloadSpec(num_prompts=2, input_len=5, output_len=2, warmup=0)
    with StandIn(refuse={"/tokenize": (404, "Not Found")}) as s:
        res = _run(s.base_url, spec)
    assert res.metrics()["completed"] == 2
    prompts = [b["prompt"] for _, p, b in s.requests if p == "/v1/completions"]
    assert all(isinstance(p, str) and len(p.split()) == 5 for p in prompts)
    assert any("no /tokenize" in n for n in res.notes)


def test_lengths_are_clamped_to_the_advertised_context():
    """GIVEN a stand-in advertising max_model_len 9 and a load of 8 in → 8 out WHEN run THEN both lengths are
    halved to fit (4 → 4) with a note."""
    with StandIn(max_model_len=9) as s:
        res = _run(s.base_url, WorkloadSpec(num_prompts=1, input_len=8, output_len=8, warmup=0))
    assert (res.spec.input_len, res.spec.output_len) == (4, 4)
    assert any("clamped to 4/4" in n for n in res.notes)


def test_refused_requests_fail_the_warm_up_or_the_load_with_the_servers_words():
    """GIVEN a stand-in refusing every completion with HTTP 500 WHEN the load runs with a warm-up, and without
    THEN WorkloadError: the warm-up failed, or every request failed — each quoting the refusal."""
    with StandIn(refuse={"/v1/completions": (500, "engine core died")}) as s:
        with pytest.raises(WorkloadError, match=r"^warm-up request failed: .* answered HTTP 500 .*engine core died"):
            _run(s.base_url, WorkloadSpec(num_prompts=2, input_len=3, output_len=2, warmup=1))
        with pytest.raises(WorkloadError, match=r"^every request failed; first error: .* answered HTTP 500"):
            _run(s.base_url, WorkloadSpec(num_prompts=2, input_len=3, output_len=2, warmup=0))


def test_an_unreachable_endpoint_is_a_server_error():
    """GIVEN a port where nothing listens WHEN the load runs THEN a ServerError (exit 3) before any request."""
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerError, match=f"^{url} did not answer GET /v1/models"):
        _run(url, WorkloadSpec(num_prompts=1, input_len=2, output_len=1))

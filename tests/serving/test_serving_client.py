"""expo_prof.serving.client: one client, one timeout and error policy, against a STAND-IN OpenAI-style server.

The stand-in (``tests/support/openai_standin.py``) is a real HTTP server with known answers; no vLLM here.
"""

from __future__ import annotations

import pytest

from expo_prof.errors import EXIT_RUN_FAILED, BadInput
from expo_prof.serving.client import Client, ServerError, check_url
from expo_prof.serving.launch import free_port
from support.openai_standin import MODEL, StandIn  # type: ignore[import-not-found]  (tests/ is on sys.path)


def test_ready_models_completion_and_the_profiler_window():
    """GIVEN a serving stand-in WHEN probed, listed, asked a greedy completion and to open and close the profiler
    THEN the model id comes back, the body holds the client's model and defaults with the call's own parameters
    winning, greedy gives the most likely token (0) every time, and both profiler calls answer 200."""
    with StandIn() as s:
        c = Client(s.base_url, model="m", defaults={"ignore_eos": True, "max_tokens": 99})
        assert c.ready() == MODEL
        assert c.first_model()["max_model_len"] == 256
        ans = c.completion("hello", max_tokens=3, temperature=0.0)
        assert ans["choices"][0]["token_ids"] == [0, 0, 0]
        assert c.profile(start=True) == (200, "") and c.profile(start=False) == (200, "")
    body = s.requests[3][2]
    assert body == {"model": "m", "prompt": "hello", "ignore_eos": True, "max_tokens": 3, "temperature": 0.0}
    assert s.paths() == ["/health", "/v1/models", "/v1/models", "/v1/completions", "/start_profile", "/stop_profile"]


def test_a_server_still_starting_or_absent_is_not_ready_and_no_error():
    """GIVEN a stand-in whose /health answers 503 for a while, and a port where nothing listens WHEN probed
    THEN not ready (None), no exception, and the listing is not asked before /health says 200."""
    with StandIn(ready_after_s=60) as s:
        assert Client(s.base_url).ready() is None
    assert s.paths() == ["/health"]
    assert Client(f"http://127.0.0.1:{free_port()}").ready() is None


def test_a_refusal_is_a_server_error_with_its_status_and_body():
    """GIVEN a stand-in refusing completions with HTTP 400 and a multi-line body WHEN a completion is asked THEN a
    ServerError (exit 3) names the URL, the request and the body on one line; the raw call returns the status."""
    with StandIn(refuse={"/v1/completions": (400, "bad\n   request\tbody")}) as s:
        c = Client(s.base_url)
        with pytest.raises(ServerError) as exc:
            c.completion("x", max_tokens=1)
        assert c.call("POST", "/v1/completions", {"prompt": "x"}) == (400, b"bad\n   request\tbody")
    err = exc.value
    assert str(err) == f"{s.base_url} answered HTTP 400 to POST /v1/completions: bad request body"
    assert (err.status, err.reason, err.exit_code) == (400, "bad request body", EXIT_RUN_FAILED)


def test_no_answer_says_so_and_whether_the_server_process_is_gone():
    """GIVEN a port where nothing listens WHEN listed by a client whose server runs, and by one whose server
    exited THEN a ServerError without status; only the second says the process has exited."""
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerError) as running:
        Client(url).models()
    with pytest.raises(ServerError) as gone:
        Client(url, alive=lambda: False).models()
    assert running.value.status is None and str(running.value).startswith(f"{url} did not answer GET /v1/models: ")
    assert "refused" in running.value.reason.lower()
    assert "(the server process has exited)" in str(gone.value) and "exited" not in str(running.value)


@pytest.mark.parametrize("listing, message", [
    ('{"data": []}', "/v1/models lists no model"),
    ("<html>not json</html>", "did not answer GET /v1/models"),
])
def test_an_empty_or_unreadable_listing_is_a_server_error(listing, message):
    """GIVEN a stand-in whose /v1/models answers 200 with no model, or with a body that is not JSON WHEN the first
    model is asked THEN a ServerError naming what was wrong."""
    with StandIn(refuse={"/v1/models": (200, listing)}) as s:
        with pytest.raises(ServerError, match=message):
            Client(s.base_url).first_model()


def test_base_urls_are_checked_and_trimmed():
    """GIVEN URLs with a trailing slash or /v1, and one without a scheme WHEN checked THEN the base URL, or BadInput
    naming the option."""
    assert check_url("http://h:8000/v1", "--off-url") == "http://h:8000"
    assert check_url("https://h/", "--on-url") == "https://h"
    with pytest.raises(BadInput, match=r"^--on-url 'h:9': give a base URL"):
        check_url("h:9", "--on-url")

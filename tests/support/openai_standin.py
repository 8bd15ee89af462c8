"""A STAND-IN for vLLM's OpenAI-compatible server (not vLLM): the endpoints expo-prof talks to, with known answers.

For the tests of ``expo_prof.serving`` (client, load generator, launch) and of ``verify``'s URL mode on a machine
without a vLLM server. It is a real HTTP server on 127.0.0.1 (stdlib ``http.server``, one thread per request), in
the test's process (:class:`StandIn`) or as a process of its own (``python openai_standin.py --port N``, what
``VllmServer(argv=...)`` launches; ``expo-prof record`` launches it in the fault tests that need only a
process that serves and then misbehaves: tests/record/test_record.py, test_load_cmd.py).

Its "model" (:data:`MODEL`) has a vocabulary of ``len(PROBS)`` tokens and the same next-token distribution
:data:`PROBS` at every position, whatever the prompt. Completions honour ``temperature`` (0: greedy), ``min_p``,
``top_k`` and ``top_p`` in vLLM's order, ``n``, ``max_tokens``, ``seed`` and ``logprobs`` (each sampled token's
logprob after processing; position 1's unprocessed top logprobs as ``token_id:N`` keys), and ``stream`` (one
server-sent event per token, then a usage chunk and ``[DONE]``). An unseeded request draws from the stand-in's
request counter, so two stand-ins sent the same requests give the same samples, in whatever order they came.

Faults, for the error paths: ``refuse={path: (status, body)}`` answers that path with that refusal,
``fail_after=N`` refuses every completion after the N-th with HTTP 500, ``ignore_top_k`` samples as if top-k
were not asked (a broken sampler), ``ready_after_s`` answers ``/health`` 503 until then.

A dead engine, as vLLM's API server shows one when its engine core died under it (``kill -9``, the OOM killer):
``dead_after=N`` kills the "engine" at the N-th completion; ``engine_child`` (``--engine-child``) runs a child
process titled ``VLLM::EngineCore`` (vLLM's own title: argv[0]) whose death, e.g. a test's ``kill -9``, kills
it. From then on: the streams in flight end with vLLM's error chunk, every completion is refused with vLLM's
HTTP 500 (:data:`DEAD_BODY`) — or, with ``dead_requests="hang"``, no completion is answered any more, the
streams in flight stall — ``/health`` answers 503 or, with ``dead_health="hang"``, never answers (what the
issue saw with the profiler on; ``"200"``: a server that does not know), and the log (stderr) gets vLLM's
lines about it.

A slow profiler, as vLLM's torch profiler on CPU: ``stop_profile_s`` (``--stop-profile-s``) holds the answer to
``/stop_profile`` that long (vLLM writes the trace, then prints its op table); with ``trace_after_s``
(``--trace-after``) a small complete trace lands in ``$VLLM_TORCH_PROFILER_DIR`` that long into it (the
trace written before the answer, as vLLM does; ``trace_write_s``: the file held open that long while it is
written, as a large trace is). ``stop_profile_s`` alone: a /stop_profile that hangs.
``start_profile_s`` (``--start-profile-s``) holds the answer to ``/start_profile`` that long: vLLM answers once
the profiler runs, and a busy server (two records side by side on two cores) answers late.
``--ignore-stop``: the process ignores SIGINT and SIGTERM (only SIGKILL ends it), a server slow to stop.
``--say-requests``: one stderr line per request arrived and per profiler call answered (``standin: arrived POST
/v1/completions``, ``standin: answered POST /start_profile``), in order: what a test reads from the run's
server.log to see when the load's requests came against the profiler window.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "standin-model"
#: The next-token distribution at every position (token id = index): 8 tokens, so that verify's top-k 5 cuts.
PROBS = (0.3, 0.2, 0.15, 0.1, 0.08, 0.07, 0.06, 0.04)
#: The text of token ``i`` (what a completion's ``text`` holds).
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")
#: Seconds between two streamed tokens (so that time to first token and inter-token latencies are not 0).
STREAM_GAP_S = 0.005
#: vLLM's answer to a completion once its engine core is dead (its ``EngineDeadError``'s message, HTTP 500), and
#: the one error chunk that ends a stream in flight then.
DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."
DEAD_BODY = {"error": {"message": DEAD_MESSAGE, "type": "InternalServerError", "param": None, "code": 500}}
#: The title vLLM gives its engine core process (setproctitle: argv[0]).
ENGINE_TITLE = "VLLM::EngineCore"


def processed(params: dict) -> list[float]:
    """The sampling distribution a request asks for: temperature, then min-p, top-k, top-p (vLLM's order)."""
    t = float(params.get("temperature", 1.0))
    if t == 0:
        best = max(range(len(PROBS)), key=PROBS.__getitem__)
        return [1.0 if i == best else 0.0 for i in range(len(PROBS))]
    w = [p ** (1 / t) for p in PROBS]
    p = [x / sum(w) for x in w]
    keep = set(range(len(p)))
    if params.get("min_p") is not None:
        keep = {i for i in keep if p[i] >= float(params["min_p"]) * max(p)}
    if params.get("top_k") is not None and not params.get("_ignore_top_k"):
        keep = set(sorted(keep, key=lambda i: -p[i])[: int(params["top_k"])])
    if params.get("top_p") is not None:
        mass, cum, nucleus = sum(p[i] for i in keep), 0.0, set()
        for i in sorted(keep, key=lambda i: -p[i]):
            if cum / mass >= float(params["top_p"]):
                break
            nucleus.add(i)
            cum += p[i]
        keep = nucleus
    total = sum(p[i] for i in keep)
    return [p[i] / total if i in keep else 0.0 for i in range(len(p))]


class StandIn:
    """The stand-in server on a free port of 127.0.0.1 in this process; use as a context manager.

    ``requests`` lists ``(method, path, body)`` of every request, in arrival order.
    """

    def __init__(self, *, refuse: dict[str, tuple[int, str]] | None = None, fail_after: int | None = None,
                 ignore_top_k: bool = False, ready_after_s: float = 0.0, port: int = 0,
                 max_model_len: int | None = 256, dead_after: int | None = None, dead_health: str = "503",
                 dead_requests: str = "500",
                 stop_profile_s: float = 0.0, trace_after_s: float | None = None, trace_write_s: float = 0.0,
                 stream_gap_s: float = STREAM_GAP_S, start_profile_s: float = 0.0, say_requests: bool = False) -> None:
        self.refuse = dict(refuse or {})
        self.fail_after = fail_after
        self.dead_after = dead_after
        self.dead_health = dead_health
        self.dead_requests = dead_requests
        self.stop_profile_s = stop_profile_s
        self.start_profile_s = start_profile_s
        self.say_requests = say_requests
        self.trace_after_s = trace_after_s
        self.trace_write_s = trace_write_s
        self.stream_gap_s = stream_gap_s
        #: When the "engine" died (time.monotonic()), None while it lives.
        self.dead_since: float | None = None
        self.ignore_top_k = ignore_top_k
        self.max_model_len = max_model_len
        self.requests: list[tuple[str, str, dict | None]] = []
        self._completions = 0
        self._draws = itertools.count()
        self._lock = threading.Lock()
        self._ready_at = time.monotonic() + ready_after_s
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StandIn:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def paths(self, method: str | None = None) -> list[str]:
        """The paths asked so far (of ``method`` only, when given)."""
        return [p for m, p, _ in self.requests if method in (None, m)]

    # ------------------------------------------------------------------ a dead engine

    def die(self, why: str) -> None:
        """The "engine" dies (once): from now on the API answers as vLLM's does with a dead engine core, and the
        log says so in vLLM's words."""
        with self._lock:
            if self.dead_since is not None:
                return
            self.dead_since = time.monotonic()
        pid = os.getpid()
        if why:
            print(f"(APIServer pid={pid}) WARNING [core_client.py:817] [shutdown] MPClient: {why}; starting cleanup",
                  file=sys.stderr, flush=True)
        print(f"(APIServer pid={pid}) ERROR [async_llm.py:906] vllm.v1.engine.exceptions.EngineDeadError: "
              f"{DEAD_MESSAGE}", file=sys.stderr, flush=True)

    def start_engine(self) -> subprocess.Popen:
        """A child process titled :data:`ENGINE_TITLE` (argv[0], as vLLM's setproctitle leaves it); its death kills
        the engine (watched by a thread)."""
        child = subprocess.Popen([ENGINE_TITLE, "-c", "import time; time.sleep(86400)"], executable=sys.executable)

        def watch() -> None:
            child.wait()
            self.die("engine core exited unexpectedly")

        threading.Thread(target=watch, daemon=True).start()
        return child

    # ------------------------------------------------------------------ answers

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet: the test's output is the assertions
                pass

            def _answer(self, status: int, payload: object, content_type: str = "application/json") -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _dispatch(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with standin._lock:
                    standin.requests.append((method, self.path, body))
                    standin._say(f"arrived {method} {self.path}")
                if self.path in standin.refuse:
                    status, text = standin.refuse[self.path]
                    return self._answer(status, text.encode(), "text/plain")
                route = {("GET", "/health"): standin._health, ("GET", "/v1/models"): standin._models,
                         ("POST", "/tokenize"): standin._tokenize, ("POST", "/v1/completions"): standin._completion,
                         ("POST", "/start_profile"): standin._profile, ("POST", "/stop_profile"): standin._profile}
                fn = route.get((method, self.path))
                if fn is None:
                    return self._answer(404, {"detail": "Not Found"})
                fn(self, body or {})

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self._dispatch("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._dispatch("POST")

        return Handler

    def _health(self, h, _body: dict) -> None:
        if self.dead_since is not None and self.dead_health != "200":
            if self.dead_health == "hang":
                time.sleep(3600)  # never answered (a thread of its own: the other requests go on)
                return
            return h._answer(503, b"", "text/plain")
        h._answer(200 if time.monotonic() >= self._ready_at else 503, b"", "text/plain")

    def _models(self, h, _body: dict) -> None:
        h._answer(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "root": None,
                                                    "max_model_len": self.max_model_len}]})

    def _tokenize(self, h, body: dict) -> None:
        words = str(body.get("prompt", "")).split()
        h._answer(200, {"tokens": [WORDS.index(w) if w in WORDS else len(w) % len(WORDS) for w in words],
                        "count": len(words)})

    def _say(self, what: str) -> None:
        if self.say_requests:
            print(f"standin: {what}", file=sys.stderr, flush=True)

    def _profile(self, h, _body: dict) -> None:
        if h.path == "/start_profile":
            time.sleep(self.start_profile_s)
        if h.path == "/stop_profile" and (self.stop_profile_s or self.trace_after_s is not None):
            t0 = time.monotonic()
            if self.trace_after_s is not None:
                time.sleep(self.trace_after_s)
                self._write_trace()
            time.sleep(max(0.0, self.stop_profile_s - (time.monotonic() - t0)))
        with self._lock:  # said before the answer leaves: nothing the answer lets happen is said before it
            self._say(f"answered POST {h.path}")
        h._answer(200, b"", "text/plain")

    def _write_trace(self) -> None:
        """A small complete Kineto-style trace in ``$VLLM_TORCH_PROFILER_DIR``, named as vLLM's worker names it;
        held open :attr:`trace_write_s` between its two halves."""
        folder = os.environ.get("VLLM_TORCH_PROFILER_DIR")
        if not folder:
            return
        doc = json.dumps({"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "standin-step", "pid": 1, "tid": 1,
                                                               "ts": 1.0, "dur": 10.0, "cat": "cpu_op"}]})
        with gzip.open(os.path.join(folder, f"rank0.{time.time_ns()}.pt.trace.json.gz"), "wt") as f:
            f.write(doc[: len(doc) // 2])
            f.flush()
            time.sleep(self.trace_write_s)
            f.write(doc[len(doc) // 2 :])

    def _completion(self, h, body: dict) -> None:
        with self._lock:
            self._completions += 1
            failing = self.fail_after is not None and self._completions > self.fail_after
            dies = self.dead_after is not None and self._completions >= self.dead_after
            draw = next(self._draws)
        if dies:
            self.die("")
        if self.dead_since is not None:
            if self.dead_requests == "hang":
                time.sleep(3600)
                return
            return h._answer(500, DEAD_BODY)
        if failing:
            return h._answer(500, b"engine core died", "text/plain")
        params = {**body, "_ignore_top_k": self.ignore_top_k}
        probs = processed(params)
        unprocessed = processed({"temperature": 1.0})
        rng = random.Random(body["seed"] if body.get("seed") is not None else draw)
        n, max_tokens = int(body.get("n", 1)), int(body.get("max_tokens", 16))
        choices = []
        for i in range(n):
            ids = rng.choices(range(len(PROBS)), weights=probs, k=max_tokens)
            choice = {"index": i, "text": " ".join(WORDS[t] for t in ids), "token_ids": ids, "finish_reason": "length"}
            if body.get("logprobs") is not None:
                top = {f"token_id:{t}": math.log(p) for t, p in enumerate(unprocessed)}
                choice["logprobs"] = {"tokens": [f"token_id:{t}" for t in ids],
                                      "token_logprobs": [math.log(probs[t]) for t in ids],
                                      "top_logprobs": [top] + [None] * (max_tokens - 1)}
            choices.append(choice)
        usage = {"prompt_tokens": len(body.get("prompt") or []), "completion_tokens": n * max_tokens}
        if not body.get("stream"):
            return h._answer(200, {"id": f"cmpl-{draw}", "object": "text_completion", "model": MODEL,
                                   "choices": choices, "usage": usage})
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()  # no length: the stream ends when the connection closes (HTTP/1.0)
        for t in choices[0]["token_ids"]:
            time.sleep(self.stream_gap_s)
            if self.dead_since is not None:  # vLLM: one error chunk, then [DONE]
                if self.dead_requests == "hang":
                    time.sleep(3600)
                    return
                h.wfile.write(b"data: " + json.dumps(DEAD_BODY).encode() + b"\n\n")
                break
            chunk = {"choices": [{"index": 0, "text": " " + WORDS[t]}], "usage": None}
            h.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            h.wfile.flush()
        if self.dead_since is None and (body.get("stream_options") or {}).get("include_usage"):
            h.wfile.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
        h.wfile.write(b"data: [DONE]\n\n")


def main() -> None:
    """Serve until killed (``--port``; ``--ready-after`` seconds of 503 on /health first; the faults above:
    ``--fail-after N``, ``--dead-after N``, ``--engine-child``, ``--dead-health 503|hang|200``,
    ``--dead-requests 500|hang``, ``--stop-profile-s S``, ``--trace-after S``, ``--trace-write-s S``, ``--stream-gap S``,
    ``--start-profile-s S``, ``--ignore-stop``, ``--say-requests``). Other flags are ignored, so a test can hand it
    a vLLM-style command line (``--max-model-len``, ``--enforce-eager`` …)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ready-after", type=float, default=0.0)
    ap.add_argument("--dead-after", type=int, default=None)
    ap.add_argument("--fail-after", type=int, default=None)
    ap.add_argument("--engine-child", action="store_true")
    ap.add_argument("--dead-health", choices=("503", "hang", "200"), default="503")
    ap.add_argument("--dead-requests", choices=("500", "hang"), default="500")
    ap.add_argument("--stop-profile-s", type=float, default=0.0)
    ap.add_argument("--trace-after", type=float, default=None)
    ap.add_argument("--trace-write-s", type=float, default=0.0)
    ap.add_argument("--stream-gap", type=float, default=STREAM_GAP_S)
    ap.add_argument("--ignore-stop", action="store_true")
    ap.add_argument("--start-profile-s", type=float, default=0.0)
    ap.add_argument("--say-requests", action="store_true")
    a, _vllm_style = ap.parse_known_args()
    if a.ignore_stop:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    standin = StandIn(port=a.port, ready_after_s=a.ready_after, fail_after=a.fail_after, dead_after=a.dead_after,
                      dead_health=a.dead_health, dead_requests=a.dead_requests, stop_profile_s=a.stop_profile_s,
                      trace_after_s=a.trace_after, trace_write_s=a.trace_write_s, stream_gap_s=a.stream_gap,
                      start_profile_s=a.start_profile_s, say_requests=a.say_requests)
    if a.engine_child:
        standin.start_engine()
    standin.httpd.serve_forever()


if __name__ == "__main__":
    main()

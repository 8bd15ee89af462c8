#!/usr/bin/env python
"""A STAND-IN for a vLLM OpenAI-style server, for tests of how expo-prof handles a server that misbehaves.

Not vLLM and never presented as one: a stdlib HTTP server that answers what
``expo-prof record`` / ``ab`` talk to (``/health``, ``/v1/models``, streamed
``/v1/completions`` with usage, ``/start_profile``, ``/stop_profile``) in well
under a second of start-up, where a real vLLM CPU server takes ~45 s. The fault
tests that need only *a process that serves and then misbehaves* (killed mid-run,
wrapped by a launch script, fed by a failing load command) use it; one fault test
per path keeps the real server (tests/record/test_record.py: Ctrl-C mid-profile,
a crash at start, a readiness timeout; tests/verify: the engine dying mid-run).

    python tests/support/standin_server.py --port P [--model NAME] [--token-ms MS] [any vLLM-style flags]

Each completion streams ``max_tokens`` tokens, one every ``--token-ms`` ms (default
20), then a usage chunk, as vLLM does with ``stream_options.include_usage``.
Unknown flags are ignored, so a test can pass it a vLLM command line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--model", default="standin")
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--max-model-len", type=int, default=256)
    ap.add_argument("--token-ms", type=float, default=20.0)
    args, _unknown = ap.parse_known_args(argv)
    model = args.served_model_name or args.model
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::", "") else args.host

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt: str, *a) -> None:  # one line per request on stderr, like a server log
            sys.stderr.write(f"standin: {self.command} {self.path}\n")

        def _json(self, code: int, doc: dict) -> None:
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 (http.server's names)
            if self.path == "/health":
                self._json(200, {})
            elif self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": model, "object": "model",
                                                             "max_model_len": args.max_model_len}]})
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            n = int(self.headers.get("Content-Length") or 0)
            req = json.loads(self.rfile.read(n) or b"{}")
            if self.path in ("/start_profile", "/stop_profile"):
                self._json(200, {})
            elif self.path == "/v1/completions":
                self._complete(req)
            else:
                self._json(404, {"error": "not found"})

        def _complete(self, req: dict) -> None:
            tokens = int(req.get("max_tokens") or 16)
            prompt = req.get("prompt") or ""
            plen = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
            if not req.get("stream"):
                time.sleep(tokens * args.token_ms / 1000)
                self._json(200, {"id": "cmpl-standin", "object": "text_completion", "model": model,
                                 "choices": [{"index": 0, "text": " x" * tokens, "finish_reason": "length"}],
                                 "usage": {"prompt_tokens": plen, "completion_tokens": tokens,
                                           "total_tokens": plen + tokens}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(doc: dict | str) -> None:
                data = f"data: {doc if isinstance(doc, str) else json.dumps(doc)}\n\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            for i in range(tokens):
                time.sleep(args.token_ms / 1000)
                chunk({"id": "cmpl-standin", "object": "text_completion", "model": model,
                       "choices": [{"index": 0, "text": " x",
                                    "finish_reason": "length" if i == tokens - 1 else None}]})
            chunk({"id": "cmpl-standin", "object": "text_completion", "model": model, "choices": [],
                   "usage": {"prompt_tokens": plen, "completion_tokens": tokens, "total_tokens": plen + tokens}})
            chunk("[DONE]")
            self.wfile.write(b"0\r\n\r\n")

    server = ThreadingHTTPServer((host, args.port), Handler)
    server.daemon_threads = True
    print(f"standin: serving {model!r} on http://{host}:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

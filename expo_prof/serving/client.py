"""The one HTTP client of an OpenAI-compatible (vLLM) server.

Everything expo-prof says to a server goes through here: readiness probing
(``/health``, ``/v1/models``), model listing, completions (one answer, or a
token stream for the load generator), ``/tokenize`` and the profiler window
(``/start_profile``, ``/stop_profile``). One policy for all of it:

* **Timeouts.** Every request has one: a readiness probe :data:`PROBE_TIMEOUT_S`,
  a model listing :data:`LIST_TIMEOUT_S`, anything else the client's
  ``timeout_s``.
* **Errors.** A refusal (an HTTP status other than 200) or no usable answer
  (connection refused, timeout, a body that is not JSON) is a
  :class:`ServerError` (exit 3) naming the URL and the request;
  :attr:`ServerError.status` tells the two apart (None: no answer). When the
  caller knows the server's process, ``alive`` adds "the server process has
  exited" to a missing answer. Only :meth:`Client.call` and the profiler
  window hand back a refusal as a status instead, and :meth:`Client.ready`
  never raises: those callers decide what a refusal means.

:class:`Client` is synchronous (stdlib ``urllib``; safe to share between
threads); :class:`AsyncClient` is the same server through one ``aiohttp``
session, for many requests in flight (``serving.load``).
"""

from __future__ import annotations

from typing import Any

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable

from expo_prof.errors import EXIT_RUN_FAILED, BadInput, ExpoProfError, import_extra

HEALTH = "/health"
MODELS = "/v1/models"
COMPLETIONS = "/v1/completions"
TOKENIZE = "/tokenize"
START_PROFILE = "/start_profile"
STOP_PROFILE = "/stop_profile"

#: Seconds one readiness probe (``/health``) may take: a server still starting is asked again.
PROBE_TIMEOUT_S = 2.0
#: Seconds a model listing (``/v1/models``) may take.
LIST_TIMEOUT_S = 10.0
#: Seconds any other request may take unless the client is given another ``timeout_s``.
REQUEST_TIMEOUT_S = 120.0
#: What a request's error says when the server gave no answer at all (connection refused or reset, timed out).
NO_ANSWER = "did not answer"
#: Characters of a refusal's body quoted in the error.
DETAIL_CHARS = 300


class ServerError(ExpoProfError):
    """The server refused a request (``status``: its HTTP status) or did not answer it (``status`` None): exit 3.

    ``reason`` is the refusal's body or why no answer came, without the URL (for callers that word it their way).
    """

    exit_code = EXIT_RUN_FAILED

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


def check_url(url: str, option: str) -> str:
    """``url`` as a base URL (no trailing slash, no ``/v1``); BadInput naming ``option`` when it is none."""
    u = urllib.parse.urlparse(url)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise BadInput(f"{option} {url!r}: give a base URL such as http://127.0.0.1:8000")
    return url.rstrip("/").removesuffix("/v1")


def _detail(body: bytes | str) -> str:
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    return " ".join(text.split())[:DETAIL_CHARS]


def first_model(base_url: str, listing: object) -> dict:
    """The first entry of a ``/v1/models`` answer; ServerError when it lists none."""
    try:
        return listing["data"][0]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        raise ServerError(f"{base_url}{MODELS} lists no model", status=200, reason="no model") from None


class _Policy:
    """What both clients share: the base URL, the request timeout, the liveness hint and the error wording."""

    def __init__(self, base_url: str, timeout_s: float, alive: Callable[[], bool] | None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.alive = alive or (lambda: True)

    def refused(self, status: int, what: str, body: bytes | str) -> ServerError:
        detail = _detail(body)
        return ServerError(f"{self.base_url} answered HTTP {status} to {what}: {detail}", status=status, reason=detail)

    def no_answer(self, what: str, exc: BaseException) -> ServerError:
        gone = "" if self.alive() else " (the server process has exited)"
        reason = str(getattr(exc, "reason", exc))
        return ServerError(f"{self.base_url} {NO_ANSWER} {what}{gone}: {reason}", reason=reason)


class Client(_Policy):
    """Requests to one server (``base_url`` without ``/v1``), synchronous.

    ``model`` fills the ``model`` field of completions that do not name one;
    ``defaults`` are put into every completion's body (the call's own
    parameters win). ``alive()`` says whether the server's process still runs.
    """

    def __init__(self, base_url: str, *, timeout_s: float = REQUEST_TIMEOUT_S, alive: Callable[[], bool] | None = None,
                 model: str | None = None, defaults: dict | None = None) -> None:
        super().__init__(base_url, timeout_s, alive)
        self.model = model
        self.defaults = dict(defaults or {})

    def call(self, method: str, path: str, body: dict | None = None, timeout: float | None = None) -> tuple[int, bytes]:
        """One request; ``(status, body)`` whatever the status. ServerError only when no answer came."""
        data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        req = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout_s) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (OSError, ValueError) as exc:
            raise self.no_answer(f"{method} {path}", exc) from None

    def json(self, method: str, path: str, body: dict | None = None, timeout: float | None = None) -> dict:
        """One request whose answer must be 200 with a JSON body (NaN / Infinity accepted: callers check them)."""
        what = f"{method} {path}"
        status, raw = self.call(method, path, body, timeout)
        if status != 200:
            raise self.refused(status, what, raw)
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise self.no_answer(what, exc) from None

    def models(self) -> dict:
        """The ``/v1/models`` answer."""
        return self.json("GET", MODELS, timeout=LIST_TIMEOUT_S)

    def first_model(self) -> dict:
        """The first served model's entry (``id``, ``root``, ``max_model_len`` …)."""
        return first_model(self.base_url, self.models())

    def ready(self) -> str | None:
        """The served model's id once ``/health`` and ``/v1/models`` both answer; None (never an error) before."""
        try:
            if self.call("GET", HEALTH, timeout=PROBE_TIMEOUT_S)[0] != 200:
                return None
            return self.first_model()["id"]
        except (ServerError, KeyError, TypeError):
            return None  # not listening yet / half up

    def completion(self, prompt: str | list[int], **params) -> dict:
        """``/v1/completions``, the whole answer; ``params`` go into the request body after :attr:`defaults`."""
        body = {"model": self.model, "prompt": prompt, **self.defaults, **params}
        return self.json("POST", COMPLETIONS, body)

    def profile(self, start: bool, timeout: float = REQUEST_TIMEOUT_S) -> tuple[int, str]:
        """``/start_profile`` or ``/stop_profile`` (vLLM writes the traces at stop): ``(status, start of the body)``."""
        status, raw = self.call("POST", START_PROFILE if start else STOP_PROFILE, timeout=timeout)
        return status, raw.decode(errors="replace")[:DETAIL_CHARS]


class AsyncClient(_Policy):
    """The same server through one ``aiohttp`` session, for many requests in flight; use ``async with``.

    ``max_connections`` caps the connections open at once (0: no cap).
    """

    def __init__(self, base_url: str, *, timeout_s: float = REQUEST_TIMEOUT_S, max_connections: int = 0) -> None:
        super().__init__(base_url, timeout_s, None)
        self.max_connections = max_connections
        self._session: Any = None  # an aiohttp.ClientSession inside ``async with`` (aiohttp imported lazily)

    async def __aenter__(self) -> AsyncClient:
        # Imported here: the extra "serve" (the built-in load), and importing expo_prof stays quick.
        aiohttp = import_extra("serve", "the built-in load")

        # No session-wide limit: each request carries its own (ClientTimeout per call).
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self.max_connections),
                                              timeout=aiohttp.ClientTimeout(total=None))
        return self

    async def __aexit__(self, *exc) -> None:
        await self._session.close()

    def _timeout(self, seconds: float | None):
        import aiohttp

        return aiohttp.ClientTimeout(total=seconds or self.timeout_s)

    @staticmethod
    def _failures() -> tuple[type[BaseException], ...]:
        import aiohttp

        return (aiohttp.ClientError, OSError, ValueError)

    async def json(self, method: str, path: str, body: dict | None = None, timeout: float | None = None) -> dict:
        """One request whose answer must be 200 with a JSON body (:meth:`Client.json`'s policy)."""
        what = f"{method} {path}"
        try:
            async with self._session.request(method, self.base_url + path, json=body,
                                             timeout=self._timeout(timeout)) as resp:
                if resp.status != 200:
                    raise self.refused(resp.status, what, await resp.text())
                return json.loads(await resp.read())
        except self._failures() as exc:
            raise self.no_answer(what, exc) from None

    async def first_model(self) -> dict:
        """The first served model's entry (``id``, ``max_model_len`` …)."""
        return first_model(self.base_url, await self.json("GET", MODELS, timeout=LIST_TIMEOUT_S))

    async def tokenize(self, model: str, text: str) -> list[int]:
        """The server's token ids of ``text`` (``POST /tokenize``, a vLLM extension)."""
        answer = await self.json("POST", TOKENIZE, {"model": model, "prompt": text})
        return (answer.get("tokens") if isinstance(answer, dict) else None) or []

    async def stream_completion(self, body: dict, timeout: float | None = None) -> AsyncIterator[dict]:
        """``/v1/completions`` with ``stream`` on: each server-sent chunk as it arrives, until ``[DONE]``."""
        what = f"POST {COMPLETIONS}"
        try:
            async with self._session.post(self.base_url + COMPLETIONS, json={**body, "stream": True},
                                          timeout=self._timeout(timeout)) as resp:
                if resp.status != 200:
                    raise self.refused(resp.status, what, await resp.text())
                async for raw in resp.content:
                    line = raw.strip()
                    if not line.startswith(b"data:"):
                        continue
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        return
                    yield json.loads(data)
        except self._failures() as exc:
            raise self.no_answer(what, exc) from None

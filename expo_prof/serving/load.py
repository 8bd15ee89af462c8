"""Built-in load generator for OpenAI-compatible completion endpoints.

Matches ``vllm bench serve --dataset-name random`` semantics: prompts of
``input_len`` random tokens (± ``range_ratio``), ``output_len`` generated tokens
with ``ignore_eos``, a request rate (Poisson, or gamma with ``burstiness``) or
all at once, capped by ``max_concurrency``. Results use the same metric names
as ``vllm bench serve --save-result`` (``output_throughput``, ``mean_ttft_ms``,
``p99_tpot_ms`` …) so that ``expo-prof compare`` reads both alike.

Prompts are sent as token-id lists. The ids are taken from the server's own
tokenisation (``POST /tokenize``) of a random word text, so they are valid for
any model without loading a tokenizer here. The requests go through
:class:`expo_prof.serving.client.AsyncClient`.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from dataclasses import asdict, dataclass, field

import numpy as np

from expo_prof.errors import ExpoProfError
from expo_prof.serving.client import AsyncClient, ServerError

#: Defaults of the published A/B runs of the feature (48 prompts, 1.5k in, 2k out).
DEFAULT_NUM_PROMPTS = 48
DEFAULT_INPUT_LEN = 1536
DEFAULT_OUTPUT_LEN = 2048

_WORDS = (
    "time person year way day thing man world life hand part child eye woman place work week case point "
    "government company number group problem fact water room mother area money story month lot right study "
    "book job word business issue side kind head house service friend father power hour game line end member"
).split()


class WorkloadError(ExpoProfError):
    """The endpoint could not be driven (the warm-up failed, every request failed).

    An endpoint that cannot be reached at all is the client's :class:`~expo_prof.serving.client.ServerError`.
    """

    exit_code = 3


#: The share of the measured requests that may fail: above it the run failed (``record`` stops the load there,
#: keeps what it captured and ends with exit 3, status ``crashed``). A dead engine fails the run at its first
#: answer, whatever the share (:func:`engine_dead`).
MAX_FAILED_SHARE = 0.10
#: vLLM's words for a dead engine core: its exception's name (the server log), and its message (what the HTTP 500
#: of every request quotes: "EngineCore encountered an issue. See stack trace (above) for the root cause.").
ENGINE_DEAD_WORDS = ("EngineDeadError", "EngineCore encountered an issue")


def engine_dead(error: str) -> bool:
    """Whether a failed request's error is vLLM's dead engine (:data:`ENGINE_DEAD_WORDS`)."""
    return any(w in error for w in ENGINE_DEAD_WORDS)


def too_many_failed(failed: int, finished: int, planned: int) -> bool:
    """Whether ``failed`` measured requests are more than :data:`MAX_FAILED_SHARE` of the run: of the ``planned``
    requests, or of those ``finished`` (failed or not) once more have finished (a run that goes on until it is
    settled). Asked after every request, it fails the run as soon as its share at the end can no longer stay
    within the limit: a run of 64 at its 7th failure."""
    return failed > MAX_FAILED_SHARE * max(finished, planned)


@dataclass
class WorkloadSpec:
    """What to send. Defaults follow the published A/B runs of the feature."""

    num_prompts: int = DEFAULT_NUM_PROMPTS
    input_len: int = DEFAULT_INPUT_LEN
    output_len: int = DEFAULT_OUTPUT_LEN
    range_ratio: float = 0.0
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    temperature: float = 1.0
    top_p: float | None = None
    top_k: int | None = None
    ignore_eos: bool = True
    warmup: int = 1
    seed: int = 0
    #: Give every request its own sampling seed (``seed + i``): exercises vLLM's per-request generators.
    per_request_seed: bool = False
    model: str | None = None
    timeout_s: float = 600.0


@dataclass
class RequestResult:
    """One request as measured at the client."""

    ok: bool
    prompt_len: int
    output_tokens: int = 0
    ttft_s: float = 0.0
    latency_s: float = 0.0
    start_s: float = 0.0  # since the benchmark start
    #: The wall clock (epoch ns) at the request's start (``start_s``): its first token arrives ``ttft_s`` later,
    #: each next one an ``itl_s`` gap after the one before, so every arrival is placed on the clock of the event
    #: log's steps (a switchback run's gaps by arm: expo_prof/analysis/saving/arrival.py). None in older workload.json.
    start_wall_ns: int | None = None
    itl_s: list[float] = field(default_factory=list)
    error: str = ""
    warmup: bool = False


@dataclass
class WorkloadResult:
    """The benchmark outcome: per-request records and ``vllm bench serve``-style metrics."""

    spec: WorkloadSpec
    requests: list[RequestResult]
    duration_s: float
    notes: list[str] = field(default_factory=list)
    #: Wall-clock (epoch ns) start and end of the measured requests (after the warm-up): the window the
    #: metrics cover, and the steps a switchback analysis compares against them. None when not measured.
    window_ns: list[int] | None = None

    def metrics(self) -> dict:
        """Aggregate metrics named as in ``vllm bench serve`` result files."""
        done = [r for r in self.requests if r.ok and not r.warmup]
        failed = [r for r in self.requests if not r.ok and not r.warmup]
        out = sum(r.output_tokens for r in done)
        inp = sum(r.prompt_len for r in done)
        ttft = np.array([r.ttft_s * 1e3 for r in done]) if done else np.array([])
        tpot = np.array(
            [(r.latency_s - r.ttft_s) * 1e3 / (r.output_tokens - 1) for r in done if r.output_tokens > 1]
        )
        itl = np.array([x * 1e3 for r in done for x in r.itl_s])
        e2el = np.array([r.latency_s * 1e3 for r in done])
        d = max(self.duration_s, 1e-9)
        m: dict = {
            "completed": len(done),
            "failed": len(failed),
            "total_input_tokens": inp,
            "total_output_tokens": out,
            "duration": self.duration_s,
            "request_throughput": len(done) / d,
            "output_throughput": out / d,
            "total_token_throughput": (inp + out) / d,
        }
        for name, arr in (("ttft", ttft), ("tpot", tpot), ("itl", itl), ("e2el", e2el)):
            if len(arr):
                m[f"mean_{name}_ms"] = float(arr.mean())
                m[f"median_{name}_ms"] = float(np.median(arr))
                m[f"p99_{name}_ms"] = float(np.percentile(arr, 99))
            else:
                m[f"mean_{name}_ms"] = m[f"median_{name}_ms"] = m[f"p99_{name}_ms"] = None
        return m

    def to_json(self) -> dict:
        """Everything, for ``workload.json`` in a run directory."""
        spec = asdict(self.spec)
        if math.isinf(spec["request_rate"]):
            spec["request_rate"] = "inf"
        return {
            "spec": spec,
            "metrics": self.metrics(),
            "notes": self.notes,
            "window_ns": self.window_ns,
            "requests": [asdict(r) for r in self.requests],
        }


def clamp_lengths(spec: WorkloadSpec, max_model_len: int | None) -> tuple[WorkloadSpec, str | None]:
    """Shrink input/output lengths that cannot fit the served model's context.

    Both are scaled by the same factor so the in/out ratio of the workload is
    kept; returns the new spec and a warning, or the spec unchanged and None.
    """
    if not max_model_len:
        return spec, None
    hi_in = int(spec.input_len * (1 + spec.range_ratio))
    hi_out = int(spec.output_len * (1 + spec.range_ratio))
    if hi_in + hi_out <= max_model_len:
        return spec, None
    budget = max_model_len - 1
    f = budget / (hi_in + hi_out)
    new_in = max(1, int(spec.input_len * f))
    new_out = max(1, int(spec.output_len * f))
    while int(new_in * (1 + spec.range_ratio)) + int(new_out * (1 + spec.range_ratio)) > budget and new_out > 1:
        new_out -= 1
    msg = (
        f"input/output lengths {spec.input_len}/{spec.output_len} do not fit the model's "
        f"max_model_len {max_model_len}: clamped to {new_in}/{new_out}"
    )
    new = WorkloadSpec(**{**asdict(spec), "input_len": new_in, "output_len": new_out})
    return new, msg


async def discover_model(client: AsyncClient) -> tuple[str, int | None]:
    """The first served model's id and its ``max_model_len`` (None if not advertised)."""
    m = await client.first_model()
    return m["id"], m.get("max_model_len")


async def _token_pool(client: AsyncClient, model: str, rng: random.Random) -> list[int]:
    """Valid token ids for this model, from the server's tokenisation of random words."""
    text = " ".join(rng.choice(_WORDS) for _ in range(400))
    try:
        return await client.tokenize(model, text)
    except ServerError:  # the endpoint is optional: prompts fall back to words
        return []


#: Output tokens of each warm-up request: a prefill and a decode step, the shortest request that runs both.
WARMUP_TOKENS = 2


def _prompts(spec: WorkloadSpec, pool: list[int], rng: random.Random, n: int) -> list[list[int] | str]:
    lo = max(1, int(spec.input_len * (1 - spec.range_ratio)))
    hi = max(lo, int(spec.input_len * (1 + spec.range_ratio)))
    out: list[list[int] | str] = []
    for _ in range(n):
        length = rng.randint(lo, hi)
        if pool:
            out.append([rng.choice(pool) for _ in range(length)])
        else:  # no /tokenize: words are roughly one token each
            out.append(" ".join(rng.choice(_WORDS) for _ in range(length)))
    return out


async def _one(client: AsyncClient, payload: dict, prompt_len: int, t0: float) -> RequestResult:
    res = RequestResult(ok=False, prompt_len=prompt_len)
    st = time.perf_counter()
    res.start_wall_ns = time.time_ns()
    res.start_s = st - t0
    last = st
    chunks = 0
    failed = ""
    try:
        async for chunk in client.stream_completion(payload):
            now = time.perf_counter()
            if chunk.get("error") and not failed:
                # The server gave up mid-stream (vLLM sends one error chunk, then [DONE], when its engine dies):
                # the request failed, however many tokens came before.
                err = chunk["error"]
                what = f"{err.get('type', 'error')}: {err.get('message', '')}" if isinstance(err, dict) else str(err)
                failed = f"the stream ended with an error after {chunks} token(s): {what}"
            usage = chunk.get("usage")
            if usage and usage.get("completion_tokens") is not None:
                res.output_tokens = int(usage["completion_tokens"])
            choices = chunk.get("choices") or []
            if choices and choices[0].get("text"):
                chunks += 1
                if res.ttft_s == 0.0:
                    res.ttft_s = now - st
                else:
                    res.itl_s.append(now - last)
                last = now
        res.latency_s = time.perf_counter() - st
        if res.output_tokens == 0:  # server sent no usage: one token per text chunk
            res.output_tokens = chunks
        res.ok = not failed
        res.error = failed[:300]
    except asyncio.CancelledError:
        res.error = "cancelled"
        raise
    except ServerError as exc:  # refused or unanswered: a result, not a crash
        res.error = str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 - a malformed chunk fails this request only
        res.error = f"{type(exc).__name__}: {exc}"[:300]
    return res


async def _until_settled(spec: WorkloadSpec, pool: list[int], rng: random.Random, until: asyncio.Event,
                         start: Callable[[int, list[int] | str], Coroutine[Any, Any, RequestResult]]) -> list[asyncio.Task]:
    """Start measured requests, ``max_concurrency`` (else ``num_prompts``) in flight, each as a slot frees, until
    ``until`` is set; returns every request's task (those in flight still running: the caller awaits them)."""
    slots = asyncio.Semaphore(spec.max_concurrency or spec.num_prompts)
    tasks: list[asyncio.Task] = []
    i = 0
    while not until.is_set():
        free = asyncio.ensure_future(slots.acquire())
        settled = asyncio.ensure_future(until.wait())
        await asyncio.wait({free, settled}, return_when=asyncio.FIRST_COMPLETED)
        settled.cancel()
        if not free.done():
            free.cancel()
            break
        if until.is_set():
            slots.release()
            break
        task = asyncio.create_task(start(i, _prompts(spec, pool, rng, 1)[0]))
        task.add_done_callback(lambda _t: slots.release())
        tasks.append(task)
        i += 1
        if not math.isinf(spec.request_rate):
            theta = 1.0 / (spec.request_rate * spec.burstiness)
            await asyncio.sleep(np.random.default_rng(spec.seed + i).gamma(spec.burstiness, theta))
    return tasks


async def run_workload(
    base_url: str,
    spec: WorkloadSpec,
    *,
    on_warmup_done: Callable[[], Awaitable[None]] | None = None,
    on_request_done: Callable[[RequestResult, int], None] | None = None,
    stop: asyncio.Event | None = None,
    collect: list[RequestResult] | None = None,
    until: asyncio.Event | None = None,
    on_measuring: Callable[[], None] | None = None,
) -> WorkloadResult:
    """Drive the endpoint: warm-up requests, then ``spec.num_prompts`` measured ones.

    ``on_warmup_done`` is awaited between the two phases (the profiler window
    opens there, before the first measured request); ``on_request_done(result, n_done)`` after each measured request.
    Setting ``stop`` ends the run early; finished requests are kept. Each
    finished request is also appended to ``collect`` as it completes, so a
    caller that is interrupted keeps every result obtained so far.

    ``until`` (a sequential switchback): the measured requests go on — ``spec.num_prompts`` in flight at once
    (or ``max_concurrency``), a new one as each finishes, at ``request_rate`` if set — until ``until`` is set;
    then no new request starts and those in flight finish (never cut mid-request). ``on_measuring`` runs when
    the measured load starts.
    """
    rng = random.Random(spec.seed)
    notes: list[str] = []
    async with AsyncClient(base_url, timeout_s=spec.timeout_s, max_connections=spec.max_concurrency or 0) as client:
        model, max_len = await discover_model(client)
        model = spec.model or model
        spec, warn = clamp_lengths(spec, max_len)
        if warn:
            notes.append(warn)
        pool = await _token_pool(client, model, rng)
        if not pool:
            notes.append("server has no /tokenize endpoint: prompts sent as text, lengths approximate")

        def payload(prompt, i: int) -> dict:
            p = {
                "model": model,
                "prompt": prompt,
                "max_tokens": spec.output_len,
                "temperature": spec.temperature,
                "ignore_eos": spec.ignore_eos,
                "stream_options": {"include_usage": True},
            }
            if spec.top_p is not None:
                p["top_p"] = spec.top_p
            if spec.top_k is not None:
                p["top_k"] = spec.top_k
            if spec.per_request_seed:
                p["seed"] = spec.seed + i
            return p

        def plen(prompt) -> int:
            return len(prompt) if isinstance(prompt, list) else len(prompt.split())

        results: list[RequestResult] = []
        t0 = time.perf_counter()
        for i, prompt in enumerate(_prompts(spec, pool, rng, spec.warmup)):
            # A full-length prompt (the prefill shapes the load will run) but only WARMUP_TOKENS out: the warm-up
            # pays the first request's one-time costs, and a full-length answer would double a short run.
            warm = {**payload(prompt, 10_000_000 + i), "max_tokens": min(spec.output_len, WARMUP_TOKENS)}
            r = await _one(client, warm, plen(prompt), t0)
            r.warmup = True
            results.append(r)
            if collect is not None:
                collect.append(r)
            if not r.ok:
                raise WorkloadError(f"warm-up request failed: {r.error}")
        if on_warmup_done:
            await on_warmup_done()

        prompts = _prompts(spec, pool, rng, spec.num_prompts) if until is None else []
        sem = asyncio.Semaphore(spec.max_concurrency) if spec.max_concurrency and until is None else None
        done_count = 0
        t0 = time.perf_counter()
        wall0 = time.time_ns()

        async def guarded(i: int, prompt) -> RequestResult:
            nonlocal done_count
            if sem:
                async with sem:
                    r = await _one(client, payload(prompt, i), plen(prompt), t0)
            else:
                r = await _one(client, payload(prompt, i), plen(prompt), t0)
            done_count += 1
            if collect is not None:
                collect.append(r)
            if on_request_done:
                on_request_done(r, done_count)
            return r

        tasks: list[asyncio.Task] = []
        if on_measuring:
            on_measuring()
        if until is not None:
            tasks = await _until_settled(spec, pool, rng, until, guarded)
        for i, prompt in enumerate(prompts):
            if stop is not None and stop.is_set():
                break
            tasks.append(asyncio.create_task(guarded(i, prompt)))
            if not math.isinf(spec.request_rate) and i + 1 < len(prompts):
                # Same inter-arrival law as vllm bench serve: gamma(shape=burstiness, mean=1/rate).
                theta = 1.0 / (spec.request_rate * spec.burstiness)
                await asyncio.sleep(np.random.default_rng(spec.seed + i).gamma(spec.burstiness, theta))
        if stop is None or until is not None:
            measured = await asyncio.gather(*tasks)
        else:
            stopper = asyncio.create_task(stop.wait())
            pending = set(tasks)
            while pending and not stop.is_set():
                _, pending = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
                pending.discard(stopper)
            for t in pending:
                t.cancel()
            stopper.cancel()
            measured = [t.result() for t in tasks if t.done() and not t.cancelled()]
            if pending:
                notes.append(f"stopped early: {len(pending)} request(s) cancelled")
        duration = time.perf_counter() - t0
        results.extend(measured)
        if not any(r.ok for r in measured) and measured:
            raise WorkloadError(f"every request failed; first error: {measured[0].error}")
    return WorkloadResult(spec=spec, requests=results, duration_s=duration, notes=notes,
                          window_ns=[wall0, wall0 + int(duration * 1e9)])

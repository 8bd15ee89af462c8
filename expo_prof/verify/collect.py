"""Send the verify request set to one OpenAI-compatible vLLM server and keep every answer.

The requests go through :class:`expo_prof.serving.client.Client` (a small
thread pool: the answers, not the timing, matter here). What a side answered
is filled into a plain dict as it arrives (:func:`new_side`), so a server that
dies mid-run still leaves everything collected so far for the JSON result.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from expo_prof.serving.client import Client
from expo_prof.verify.spec import SamplingConfig, VerifySpec

#: vLLM's OpenAI server writes a -inf logprob as this (completion/serving.py: ``max(logprob, -9999.0)``).
NEG_INF_LOGPROB = -9999.0
#: Top logprobs of the position-1 reference (vLLM's default ``--max-logprobs`` is 20).
REFERENCE_TOP = 20
#: In every verify completion: the requested length whatever the model samples, and the token ids
#: (``token_ids`` and ``token_id:N`` strings) rather than text.
REQUEST_DEFAULTS = {"ignore_eos": True, "return_token_ids": True, "return_tokens_as_token_ids": True}


def side_client(url: str, timeout_s: float, alive: Callable[[], bool] | None = None) -> Client:
    """The client of one side: :data:`REQUEST_DEFAULTS` in every completion; the model is set by :func:`collect`."""
    return Client(url, timeout_s=timeout_s, alive=alive, defaults=REQUEST_DEFAULTS)


def _ids(choice: dict) -> list[int]:
    """The generated token ids of one choice (``return_token_ids``; else parsed from ``token_id:N`` strings)."""
    if choice.get("token_ids") is not None:
        return [int(t) for t in choice["token_ids"]]
    toks = (choice.get("logprobs") or {}).get("tokens") or []
    return [int(t.split(":", 1)[1]) for t in toks]


def _logprobs(choice: dict) -> list[float | None]:
    lp = choice.get("logprobs") or {}
    return [None if x is None else float(x) for x in lp.get("token_logprobs") or []]


def _top(choice: dict) -> dict[int, float]:
    """Position 1's top logprobs as {token id: logprob}."""
    tops = (choice.get("logprobs") or {}).get("top_logprobs") or [None]
    return {int(k.split(":", 1)[1]): float(v) for k, v in (tops[0] or {}).items()}


def vocab_from_model_dir(root: str | None) -> int | None:
    """``vocab_size`` of a local Hugging Face model directory (config.json, or its text_config)."""
    if not root:
        return None
    cfg = Path(root) / "config.json"
    try:
        data = json.loads(cfg.read_text())
    except (OSError, ValueError):
        return None
    v = data.get("vocab_size") or (data.get("text_config") or {}).get("vocab_size")
    return int(v) if isinstance(v, int) and v > 0 else None


def new_side(label: str, url: str) -> dict:
    """The empty record of one side (filled by :func:`collect`)."""
    return {"label": label, "url": url, "model": None, "vocab_size": None, "vocab_source": None,
            "processed_logprobs": None, "reference": {}, "greedy_alone": [], "greedy_mixed": [],
            "seeded": {"alone": [], "mixed": []}, "samples": {}, "complete": False, "error": None}


def collect(side: dict, client: Client, spec: VerifySpec, progress: Callable[[str], None] = lambda _m: None) -> dict:
    """Send the whole request set to one server, filling ``side`` as answers arrive."""
    entry = client.first_model()
    client.model = side["model"] = entry["id"]
    if spec.vocab_size:
        side["vocab_size"], side["vocab_source"] = spec.vocab_size, "--vocab-size"
    elif (v := vocab_from_model_dir(entry.get("root"))) is not None:
        side["vocab_size"], side["vocab_source"] = v, f"{entry.get('root')}/config.json"
    # Processed logprobs: with min_p=1 only the most likely token is left, so after processing its logprob is 0.
    # min-p (a logits processor), not top-k: the probe must not depend on the sampler path under test.
    probe = client.completion(spec.prompts[0], max_tokens=1, temperature=1.0, min_p=1.0, logprobs=1)
    lp = _logprobs(probe["choices"][0])
    side["processed_logprobs"] = bool(lp) and lp[0] is not None and abs(lp[0]) < 1e-4
    dist_prompt = spec.prompts[0]
    # Position 1's distribution at T=1, unprocessed: a greedy-only batch returns log_softmax(logits).
    ref = client.completion(dist_prompt, max_tokens=1, temperature=0.0, logprobs=REFERENCE_TOP)
    side["reference"] = {str(k): v for k, v in _top(ref["choices"][0]).items()}
    progress("greedy and seeded requests")
    greedy = {"max_tokens": spec.greedy_tokens, "temperature": 0.0, "logprobs": 1}
    seeded = {"max_tokens": spec.greedy_tokens, "temperature": 1.0, "seed": spec.seed, "logprobs": 1}
    for p in spec.prompts:  # one at a time: all-greedy batches
        side["greedy_alone"].append(_ids(client.completion(p, **greedy)["choices"][0]))
    for _ in range(2):
        side["seeded"]["alone"].append(_ids(client.completion(spec.prompts[-1], **seeded)["choices"][0]))
    # The same greedy and seeded requests again, in flight together with sampled ones: mixed batches,
    # where a greedy row must still be the argmax (the original feature's review found it sampled).
    first = spec.configs[0]
    with ThreadPoolExecutor(max(2, spec.concurrency + len(spec.prompts) + 1)) as pool:
        sampled = [pool.submit(client.completion, dist_prompt, n=spec.per_request, max_tokens=spec.greedy_tokens,
                               **first.params()) for _ in range(max(1, spec.concurrency))]
        gs = [pool.submit(client.completion, p, **greedy) for p in spec.prompts]
        sd = pool.submit(client.completion, spec.prompts[-1], **seeded)
        side["greedy_mixed"] = [_ids(f.result()["choices"][0]) for f in gs]
        side["seeded"]["mixed"].append(_ids(sd.result()["choices"][0]))
        mixed_tokens = [_ids(c) for f in sampled for c in f.result()["choices"]]
    side["mixed_sampled_tokens"] = mixed_tokens
    for cfg in spec.configs:
        progress(f"sampling: {cfg.name}")
        out: dict[str, list] = {"tokens": [], "logprobs": []}
        side["samples"][cfg.name] = out  # partial answers stay in ``side``
        _sample(client, dist_prompt, cfg, spec, out)
    side["complete"] = True
    return side


def _sample(client: Client, prompt: str, cfg: SamplingConfig, spec: VerifySpec, out: dict) -> None:
    """``spec.samples`` samples of the first ``spec.positions`` tokens under ``cfg``, appended to ``out``."""
    sizes = [spec.per_request] * (spec.samples // spec.per_request)
    if spec.samples % spec.per_request:
        sizes.append(spec.samples % spec.per_request)
    with ThreadPoolExecutor(max(1, spec.concurrency)) as pool:
        futs = [pool.submit(client.completion, prompt, n=k, max_tokens=spec.positions, logprobs=1, **cfg.params())
                for k in sizes]
        for f in futs:
            for c in f.result()["choices"]:
                out["tokens"].append(_ids(c))
                out["logprobs"].append(_logprobs(c))


def is_finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)

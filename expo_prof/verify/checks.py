"""The checks of ``expo-prof verify``: pure functions of what the two sides answered.

Each check returns a plain dict (the JSON result's entries, docs/json-output.md)
with a ``status``: ``ok``, ``differs`` (counts against the overlay), ``info``
(reported, not judged) or ``not_run`` (the data were not collected).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from expo_prof.verify.chi2 import detectable_tv, two_sample
from expo_prof.verify.collect import NEG_INF_LOGPROB
from expo_prof.verify.spec import SamplingConfig, VerifySpec

#: Lanes on which a seeded request must give the overlay-off tokens (the same generator redrawn in the same order).
DEVICE_LANES = ("cuda", "npu")
#: Slack at top-k / top-p / min-p boundaries (float ties, renormalisation): the allowed set is a superset.
_REL_TOL = 1e-4


def _first_diff(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def greedy(off: dict, on: dict, prompts: tuple[str, ...]) -> dict:
    """Temperature 0: the same token ids with the overlay on, alone and in mixed batches."""
    rows, compared = [], 0
    for batch in ("alone", "mixed"):
        a, b = off.get(f"greedy_{batch}") or [], on.get(f"greedy_{batch}") or []
        for i, (x, y) in enumerate(zip(a, b)):
            compared += 1
            d = _first_diff(x, y)
            if d is not None:
                rows.append({"prompt": prompts[i] if i < len(prompts) else i, "batch": batch, "first_diff": d,
                             "off": x[d:d + 4], "on": y[d:d + 4]})
    if compared == 0:
        return {"status": "not_run", "compared": 0, "identical": 0, "mismatches": []}
    return {"status": "differs" if rows else "ok", "compared": compared, "identical": compared - len(rows),
            "mismatches": rows}


def seeded(off: dict, on: dict, device: str) -> dict:
    """Seeded requests: repeatable with the overlay on; equal to overlay-off only where that is guaranteed."""
    def runs(side: dict) -> list[list[int]]:
        s = side.get("seeded") or {}
        return list(s.get("alone") or []) + list(s.get("mixed") or [])

    a, b = runs(off), runs(on)
    if len(b) < 2:
        return {"status": "not_run", "device": device}
    on_rep = all(x == b[0] for x in b)
    off_rep = len(a) >= 2 and all(x == a[0] for x in a)
    same = bool(a) and a[0] == b[0]
    judged = device in DEVICE_LANES
    if device in DEVICE_LANES:
        guarantee = ("device lane: the overlay redraws each seeded row from its own generator in vLLM's order, "
                     "so the tokens must equal overlay-off")
    elif device == "cpu":
        guarantee = ("CPU: with the overlay on, vLLM's native sampling path replaces the fused C++ Gumbel op, so a "
                     "seeded request repeats exactly with the overlay on but is not token-for-token equal to "
                     "overlay-off (reported, not judged)")
    else:
        guarantee = "device unknown (--device): on/off equality reported, not judged"
    status = "ok"
    if not on_rep or (judged and not same):
        status = "differs"
    return {"status": status, "device": device, "repeatable_on": on_rep, "repeatable_off": off_rep,
            "equal_on_off": same, "on_off_judged": judged, "requests_on": len(b), "guarantee": guarantee}


def distributions(off: dict, on: dict, spec: VerifySpec) -> dict:
    """Per sampling setting and first position: a two-sample test off vs on, and its power."""
    tests: list[dict[str, Any]] = []
    for cfg in spec.configs:
        a, b = (off.get("samples") or {}).get(cfg.name), (on.get("samples") or {}).get(cfg.name)
        if not a or not b or not a["tokens"] or not b["tokens"]:
            continue
        for pos in range(spec.positions):
            xa = [t[pos] for t in a["tokens"] if len(t) > pos]
            xb = [t[pos] for t in b["tokens"] if len(t) > pos]
            if not xa or not xb:
                continue
            r = two_sample(np.array(xa), np.array(xb))
            tests.append({"config": cfg.name, "position": pos + 1, "method": r.method, "statistic": r.statistic,
                          "df": r.df, "p": r.p, "n_off": r.n_a, "n_on": r.n_b, "bins": r.bins,
                          "pooled_tokens": r.pooled_tokens, "tv_observed": r.tv})
    m = max(1, len(tests))
    level = spec.alpha / m  # Bonferroni: the family-wise level over every test is spec.alpha
    for t in tests:
        t["significant"] = t["p"] < level
        t["detectable_tv"] = detectable_tv(t["n_off"], t["n_on"], max(1, t["bins"] - 1), level, spec.power)
    if not tests:
        return {"status": "not_run", "tests": [], "alpha": spec.alpha, "per_test_alpha": level, "power": spec.power}
    return {"status": "differs" if any(t["significant"] for t in tests) else "ok", "tests": tests,
            "alpha": spec.alpha, "per_test_alpha": level, "power": spec.power,
            "detectable_tv": max(t["detectable_tv"] for t in tests), "min_p": min(t["p"] for t in tests)}


def allowed_first(reference: dict[str, float], cfg: SamplingConfig) -> set[int] | None:
    """Token ids position 1 may take under ``cfg`` (vLLM's order: min-p, then top-k, then top-p).

    ``reference`` is position 1's top log-probabilities at temperature 1 (unprocessed). None when the
    set cannot be told from them (it reaches past the known top tokens). Boundaries get a small slack,
    so the set is a superset where floats could tip either way.
    """
    if not reference or cfg.temperature != 1.0:
        return None
    items = sorted(((int(k), math.exp(v)) for k, v in reference.items() if v > NEG_INF_LOGPROB),
                   key=lambda kv: -kv[1])
    if not items:
        return None
    ids, probs = [k for k, _ in items], [p for _, p in items]
    # tail: whether tokens beyond the known top list may still be allowed
    tail = sum(probs) < 1 - _REL_TOL
    keep = len(ids)
    if cfg.min_p is not None:
        thr = cfg.min_p * probs[0] * (1 - _REL_TOL)
        keep = sum(p >= thr for p in probs)
        tail = tail and keep == len(ids)
    if cfg.top_k is not None:
        if tail and cfg.top_k > len(ids):
            return None
        if cfg.top_k < keep or tail:
            kth = probs[min(cfg.top_k, keep) - 1]
            keep = sum(p >= kth * (1 - _REL_TOL) for p in probs[:keep])
            tail = False
    if cfg.top_p is not None:
        mass = 1.0 if tail else sum(probs[:keep])  # renormalised over what min-p / top-k kept
        cum, n = 0.0, 0
        for p in probs[:keep]:
            if cum / mass >= cfg.top_p + _REL_TOL:
                break
            cum += p
            n += 1
        if tail and cum / mass < cfg.top_p + _REL_TOL:
            return None  # the nucleus reaches past the known tokens
        keep, tail = n, False
    return None if tail else set(ids[:keep])


def constraints(side: dict, spec: VerifySpec) -> dict:
    """Every sampled token allowed: position 1 against the reference, every position by its processed logprob."""
    per = []
    for cfg in spec.configs:
        data = (side.get("samples") or {}).get(cfg.name)
        if not data or not data["tokens"]:
            continue
        allowed = allowed_first(side.get("reference") or {}, cfg) if cfg.constrained else None
        outside = sum(1 for t in data["tokens"] if t and allowed is not None and t[0] not in allowed)
        masked = 0
        if side.get("processed_logprobs"):
            masked = sum(1 for lps in data["logprobs"] for x in lps if x is not None and x <= NEG_INF_LOGPROB)
        per.append({"config": cfg.name, "samples": len(data["tokens"]),
                    "allowed_first": None if allowed is None else len(allowed),
                    "outside_allowed_first": outside, "masked_tokens_sampled": masked})
    if not per:
        return {"status": "not_run", "per_config": [], "processed_logprobs": side.get("processed_logprobs")}
    bad = any(r["outside_allowed_first"] or r["masked_tokens_sampled"] for r in per)
    return {"status": "differs" if bad else "ok", "per_config": per,
            "processed_logprobs": side.get("processed_logprobs")}


def _all_tokens(side: dict) -> list[int]:
    out = [t for seq in (side.get("greedy_alone") or []) + (side.get("greedy_mixed") or []) for t in seq]
    s = side.get("seeded") or {}
    out += [t for seq in (s.get("alone") or []) + (s.get("mixed") or []) for t in seq]
    out += [t for seq in side.get("mixed_sampled_tokens") or [] for t in seq]
    for d in (side.get("samples") or {}).values():
        out += [t for seq in d["tokens"] for t in seq]
    return out


def sanity(side: dict) -> dict:
    """No token id outside the vocabulary, no NaN/inf logprob (the vllm-ascend #13394 class of bug)."""
    toks = _all_tokens(side)
    vocab = side.get("vocab_size")
    bad_ids = sorted({t for t in toks if t < 0 or (vocab is not None and t >= vocab)})
    lps = [x for d in (side.get("samples") or {}).values() for seq in d["logprobs"] for x in seq if x is not None]
    nonfinite = sum(1 for x in lps if not math.isfinite(x))
    status = "differs" if bad_ids or nonfinite else "ok"
    if not toks:
        status = "not_run"
    return {"status": status, "tokens": len(toks), "vocab_size": vocab, "vocab_source": side.get("vocab_source"),
            "out_of_vocab": bad_ids[:20], "out_of_vocab_count": len(bad_ids), "logprobs": len(lps),
            "nonfinite_logprobs": nonfinite,
            "note": None if vocab is not None else "vocabulary size unknown (pass --vocab-size): only negative ids checked"}

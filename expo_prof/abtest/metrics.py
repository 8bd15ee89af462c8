"""The metrics an A/B comparison knows: names, units, and which direction is better.

Names follow ``vllm bench serve`` result files (``output_throughput``,
``mean_ttft_ms`` …), so the built-in workload, ``vllm bench serve`` results
and hand-made tables are read alike. The mechanism metrics come from
``analysis.json`` (``expo-prof analyze --json``) of each run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HIGHER = 1  # more is better (throughput)
LOWER = -1  # less is better (latency, exposed time)

#: What a metric's two sides must share to be one measure (``Metric.like_by``), so that their difference is a
#: change (expo_prof/abtest/judging/likeness.py). Where the sides differ in it, compare shows each side's values
#: and the reason, and no change, CI, test or outcome (``MetricResult.not_compared``).
#: Nothing: the figure means the same whatever produced it.
ALWAYS_LIKE = ""
#: The forward time's source (``summary.forward_source``): a forward span (``expo_prof::forward``, vLLM's
#: ``execute_context`` / ``gpu_model_runner: forward``) or compute-busy time; each encloses something else.
FORWARD = "forward"
#: What the instances are (``ranks[].rule``): the exponential draw (any draw rule: the overlay's span or log,
#: the exponential kernel / chain / op) or a whole fused sampler with its noise inside (a FUSED_SAMPLERS rule
#: of expo_prof/analysis/targets.py: noise + argmax in one op), or an ``--op`` target.
INSTANCES = "instances"


@dataclass(frozen=True)
class Metric:
    """One comparable quantity."""

    name: str
    label: str
    unit: str
    better: int  # HIGHER or LOWER
    #: Shown in the default table (the rest only with --all-metrics / in --json).
    main: bool = False
    #: From the traces (analysis.json): the "why", not the "what".
    mechanism: bool = False
    #: What the two sides must share for their difference to be a change: ALWAYS_LIKE, FORWARD or INSTANCES.
    like_by: str = ALWAYS_LIKE


# The client's figures (the built-in load, `vllm bench serve`, a table's columns): one definition each, whatever
# the engine measured or however the server was traced, so never unlike by their source. (That both sides ran
# the same workload is the workload check's job: abtest/inputs/workloads.py refuses a mismatch.)
_SERVE = [
    Metric("output_throughput", "output tok/s", "tok/s", HIGHER, main=True),
    Metric("total_token_throughput", "total tok/s", "tok/s", HIGHER),
    Metric("request_throughput", "requests/s", "req/s", HIGHER),
    Metric("mean_ttft_ms", "TTFT mean", "ms", LOWER, main=True),
    Metric("median_ttft_ms", "TTFT p50", "ms", LOWER),
    Metric("p99_ttft_ms", "TTFT p99", "ms", LOWER),
    Metric("mean_tpot_ms", "TPOT mean", "ms", LOWER, main=True),
    Metric("median_tpot_ms", "TPOT p50", "ms", LOWER),
    Metric("p99_tpot_ms", "TPOT p99", "ms", LOWER),
    Metric("mean_itl_ms", "ITL mean", "ms", LOWER),
    Metric("median_itl_ms", "ITL p50", "ms", LOWER),
    Metric("p99_itl_ms", "ITL p99", "ms", LOWER),
    Metric("mean_e2el_ms", "E2E latency mean", "ms", LOWER),
    Metric("median_e2el_ms", "E2E latency p50", "ms", LOWER),
    Metric("p99_e2el_ms", "E2E latency p99", "ms", LOWER),
]
# The traces' figures per step (analysis.json summary.per_step), each unlike where what it times differs:
_MECHANISM = [
    # The instances' exposed time and the sampler's wait, counted once: unlike where the instances are a fused
    # sampler (noise + argmax) on one side and the draw on the other (the wait is one measure: below).
    Metric("critical_us_per_step", "critical path / step", "µs", LOWER, main=True, mechanism=True, like_by=INSTANCES),
    # The instances' time with no other compute lane busy: unlike by the instances, as above.
    Metric("exposed_exp_us_per_step", "exposed exp / step", "µs", LOWER, main=True, mechanism=True, like_by=INSTANCES),
    # A forward span's length or the compute lanes' busy time: unlike by the forward source.
    Metric("forward_us_per_step", "forward / step", "µs", LOWER, main=True, mechanism=True, like_by=FORWARD),
    # The instances' time beside other compute (analysis/overlap/hidden.py: other lanes, not the forward span, so
    # the forward source does not enter): unlike by the instances.
    Metric("hidden_exp_us_per_step", "hidden exp / step", "µs", HIGHER, mechanism=True, like_by=INSTANCES),
    # The instances' own time: unlike by the instances.
    Metric("exp_us_per_step", "exp draw / step", "µs", LOWER, mechanism=True, like_by=INSTANCES),
    # The overlay's expo_prof::wait span (or its log's wait window): one definition, only overlay runs have it.
    Metric("wait_us_per_step", "sampler wait / step", "µs", LOWER, mechanism=True),
]

#: Every known metric in display order.
METRICS: dict[str, Metric] = {m.name: m for m in _SERVE + _MECHANISM}

#: The metric the verdict is about unless --primary says otherwise (first one present wins).
PRIMARY_ORDER = ("output_throughput", "total_token_throughput", "request_throughput", "mean_tpot_ms", "mean_ttft_ms")

#: Other spellings seen in tables (lower-cased, non-alphanumerics → "_") → canonical name.
ALIASES: dict[str, str] = {
    "output_token_throughput": "output_throughput",
    "output_token_throughput_tok_s": "output_throughput",
    "output_tok_s": "output_throughput",
    "output_tokens_per_s": "output_throughput",
    "output_tokens_s": "output_throughput",
    "tok_s": "output_throughput",
    "total_token_throughput_tok_s": "total_token_throughput",
    "total_tok_s": "total_token_throughput",
    "tokens_s": "total_token_throughput",
    "tokens_per_s": "total_token_throughput",
    "request_throughput_req_s": "request_throughput",
    "requests_s": "request_throughput",
    "requests_per_s": "request_throughput",
    "req_s": "request_throughput",
    "ttft_ms": "mean_ttft_ms",
    "mean_ttft": "mean_ttft_ms",
    "ttft": "mean_ttft_ms",
    "tpot_ms": "mean_tpot_ms",
    "mean_tpot": "mean_tpot_ms",
    "tpot": "mean_tpot_ms",
    "itl_ms": "mean_itl_ms",
    "itl": "mean_itl_ms",
}

#: Columns that describe a run or its workload, never compared as metrics.
DESCRIPTOR_COLUMNS = {
    "run", "label", "name", "id", "round", "trial", "order", "date", "side", "arm", "overlay", "mode", "group",
    "variant", "config", "model", "model_id", "tokenizer_id", "backend", "endpoint_type", "num_prompts",
    "input_len", "output_len", "random_input_len", "random_output_len", "max_concurrency", "request_rate",
    "burstiness", "dataset", "dataset_name", "range_ratio", "temperature", "top_p", "top_k", "completed",
    "failed", "duration", "total_input_tokens", "total_output_tokens", "notes", "comment", "source",
}


def canonical(column: str) -> str | None:
    """The metric name a table column stands for, or None when it is not a known metric."""
    key = re.sub(r"[^a-z0-9]+", "_", column.strip().lower()).strip("_")
    if key in METRICS:
        return key
    return ALIASES.get(key)


def primary_of(names: set[str], wanted: str | None = None) -> str | None:
    """The verdict's metric: ``wanted`` when given (canonicalised), else the first of PRIMARY_ORDER present."""
    if wanted:
        return canonical(wanted)
    for n in PRIMARY_ORDER:
        if n in names:
            return n
    return next((n for n in METRICS if n in names and not METRICS[n].mechanism), None)

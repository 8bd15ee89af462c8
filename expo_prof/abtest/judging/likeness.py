"""Whether a metric's two sides are one measure: a difference is a change only between like figures.

Each metric says what its sides must share (:attr:`~expo_prof.abtest.metrics.Metric.like_by`, the reasons
beside each metric in expo_prof/abtest/metrics.py):

* **the forward source** (``forward / step``): a forward span's length (the overlay's ``expo_prof::forward``,
  vLLM's ``execute_context`` or ``gpu_model_runner: forward``) or the compute lanes' busy time where a trace has
  no forward span. Two spans enclose different work: ``execute_context`` off vs ``expo_prof::forward`` on differ
  by what each holds, not by contention. A side whose runs (or ranks) differ is no one measure either.
* **what the instances are** (``exp draw``, ``exposed exp``, ``hidden exp``, ``critical path``): the
  exponential draw (the overlay's span or log window, the exponential kernel, Ascend's chain, the CPU op: one
  thing, timed where each trace shows it) or a whole fused sampler that draws its noise inside
  (:data:`expo_prof.analysis.targets.FUSED_SAMPLERS`, e.g. vLLM CPU's ``_C::fused_gumbel_argmax``: noise and
  argmax in one op), or an ``--op`` target. vLLM CPU as shipped (overlay off) is found by its fused op; with the
  overlay on, by the overlay's draw: the two are different things (the committed
  ``traces/samples/tiny-cpu-off-on``).

Where the sides differ, the metric is *not compared*: each side's values are kept, and the reason replaces
the change, its CI, the tests and the outcome (``MetricResult.not_compared``). A run that does not say (a table,
an analysis.json from before these keys) is no evidence either way: only the runs that say are judged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from expo_prof.abtest.inputs.sides import Run
from expo_prof.abtest.metrics import FORWARD, INSTANCES, Metric
from expo_prof.words import COMPUTE_BUSY, FORWARD_SPANS, MIXED, common_forward_source

#: ``ranks[].rule`` of instances that are the exponential draw itself (expo_prof/analysis/targets.py,
#: ``find_instances``): the overlay's span on a device stream or host thread, its event log's window, the
#: exponential kernel, Ascend's composite chain, PyTorch's CPU op. Every other rule's instances are something
#: else: a fused sampler (targets.FUSED_SAMPLERS) or ``--op``'s target. (abtest reaches analysis only through
#: the pipeline, tools/layering.py: the names are spelled here; tests/abtest/test_likeness.py keeps them
#: in step with targets.py.)
DRAW_RULES = frozenset({"overlay-span", "overlay-log", "device-kernel", "ascend-chain", "host-span", "cpu-op"})
#: The kind of instances found by any of :data:`DRAW_RULES`.
DRAW = "draw"

#: The fused samplers (targets.FUSED_SAMPLERS) in a few words, for a table cell.
FUSED_WORDS = {
    "cpu-fused-gumbel": "vLLM CPU's fused noise+argmax op _C::fused_gumbel_argmax",
    "cpu-mrv2-gumbel": "vLLM CPU's fused noise+argmax op _C::gumbel_sample_cpu",
    "mrv2-fused-gumbel": "vLLM's fused noise+argmax kernel _gumbel_sample_kernel",
    "flashinfer-sampling": "FlashInfer's sampling kernels, noise drawn inside",
    "ascend-v2-categorical": "vllm-ascend's categorical_sample kernels, one uniform per row",
}


def instance_kind(info: dict) -> str | None:
    """What a run's instances are: ``draw``, a fused sampler's rule (``+``-joined where its ranks found
    several), ``op:REGEX`` for an ``--op`` target; None when the run does not say."""
    if info.get("op"):
        return f"op:{info['op']}"
    rules = info.get("rules")
    if rules is None:  # a Run built without the key: its first rank's rule is all there is
        rule = info.get("rule")
        rules = str(rule).split("+") if rule else []
    if not rules:
        return None
    return "+".join(sorted({DRAW if r in DRAW_RULES else str(r) for r in rules}))


def kind_words(kind: str) -> str:
    """An instance kind in words: ``the exponential draw alone``, ``vLLM CPU's fused noise+argmax op (…)``."""
    if kind.startswith("op:"):
        return f"the --op {kind[3:]} target"
    return " and ".join("the exponential draw alone" if k == DRAW else FUSED_WORDS.get(k, f"the {k} instances")
                        for k in kind.split("+"))


def _common(kinds: Iterable[str | None]) -> str | None:
    """One kind for several runs: :data:`~expo_prof.words.MIXED` when they differ, None when none says."""
    known = {k for k in kinds if k is not None}
    if not known:
        return None
    return known.pop() if len(known) == 1 else MIXED


def side_kinds(a_runs: Sequence[Run], b_runs: Sequence[Run]) -> tuple[str | None, str | None]:
    """Each side's instance kind (MIXED when its runs differ; None when none says)."""
    return (_common(instance_kind(r.info) for r in a_runs), _common(instance_kind(r.info) for r in b_runs))


def _forward_words(source: str) -> str:
    if source == COMPUTE_BUSY:
        return "compute-busy time (no forward span)"
    return FORWARD_SPANS.get(source, f"the {source} span")


def _mixed(what: str, a: str, b: str, a_name: str, b_name: str) -> str | None:
    """The words for a side whose runs differ among themselves in ``what``; None when neither does."""
    mixed = [n for n, k in ((a_name, a), (b_name, b)) if k == MIXED]
    if not mixed:
        return None
    return f"{what} differ across the runs (or ranks) of the {' and '.join(mixed)} side{'s' if len(mixed) > 1 else ''}"


def forward_unlike(a_name: str, a_runs: Sequence[Run], b_name: str, b_runs: Sequence[Run]) -> str | None:
    """Why the sides' forward figures are no one measure (``forward by X (off) vs Y (on)``); None when alike."""
    a = common_forward_source(r.info.get("forward_source") for r in a_runs)
    b = common_forward_source(r.info.get("forward_source") for r in b_runs)
    if a is None or b is None or (a == b and a != MIXED):  # one measure, or a side does not say
        return None
    return (_mixed("the forward sources", a, b, a_name, b_name)
            or f"forward by {_forward_words(a)} ({a_name}) vs {_forward_words(b)} ({b_name})")


def instances_unlike(a_name: str, a_runs: Sequence[Run], b_name: str, b_runs: Sequence[Run]) -> str | None:
    """Why the sides' instances are no one measure (``vLLM CPU's fused … (off) vs the exponential draw alone
    (on)``); None when alike."""
    a, b = side_kinds(a_runs, b_runs)
    if a is None or b is None or (a == b and a != MIXED):  # one measure, or a side does not say
        return None
    return (_mixed("the instances timed", a, b, a_name, b_name)
            or f"{kind_words(a)} ({a_name}) vs {kind_words(b)} ({b_name})")


def unlike(metric: Metric, a_name: str, a_runs: Sequence[Run], b_name: str, b_runs: Sequence[Run]) -> str | None:
    """Why ``metric``'s two sides measure different things (the reason shown instead of a change); None when
    they are one measure. Only the runs that have the metric are judged."""
    if metric.like_by not in (FORWARD, INSTANCES):
        return None
    a = [r for r in a_runs if r.values.get(metric.name) is not None]
    b = [r for r in b_runs if r.values.get(metric.name) is not None]
    if metric.like_by == FORWARD:
        return forward_unlike(a_name, a, b_name, b)
    return instances_unlike(a_name, a, b_name, b)

"""What a trace can say about saving where no switchback can run: the fused sampling kernel's share of the step.

On engines whose sampler draws its noise inside its own kernel (vLLM Model
Runner V2's ``_gumbel_sample_kernel``, FlashInfer's sampling kernels, vLLM
CPU's fused Gumbel ops; :data:`~expo_prof.analysis.targets.FUSED_SAMPLERS`)
the instances are the whole sampling kernels. Their time on the critical path
per step is then the most any asynchronous draw could take off the step: the
noise is only part of that kernel (the logits are read, scaled, compared too),
and hiding it costs the forward something. That is an upper bound, not a
saving; :func:`sampling_bound` states it with the same figures every output
prints (the headline's ``critical path …/step``, the report's own time).

A sampler that draws no noise over the vocabulary (vllm-ascend's Model Runner
V2 ``categorical_sample``: one uniform per row, inverse-CDF; ``noise`` false)
has nothing an async draw could take off the step: the same figure is then its
sampling *cost*, and every output says that nothing can be saved. Where such
kernels share a recording with kernels that do draw noise, the figure stays a
bound (``noise`` true): it counts the noise-free kernels' time too, so it is a
looser one, and the saving line says so (:func:`noise_free`).
"""

from __future__ import annotations

from expo_prof.analysis.model import AnalysisResult, SamplingBound
from expo_prof.analysis.steps.means import mean_own_ns
from expo_prof.analysis.targets import FUSED_SAMPLERS, FusedSampler


def sampling_bound(result: AnalysisResult | None) -> SamplingBound | None:
    """The bound of a recording's :class:`~expo_prof.analysis.model.AnalysisResult` whose every rank found its
    instances by a fused-sampler rule; None otherwise (an exponential draw, an overlay, ``--op``)."""
    if result is None or result.summary is None or result.op is not None or not result.ranks:
        return None
    rules = sorted({r for rk in result.ranks for r in rk.rule.split("+")})
    if not rules or any(r not in FUSED_SAMPLERS for r in rules):
        return None
    kinds = [FUSED_SAMPLERS[r] for r in rules]
    ps = result.summary.per_step
    crit = ps.critical_ns.mean if ps.critical_ns is not None else ps.exposed_ns.mean
    step_ns = mean_own_ns(result.steps)
    return SamplingBound(
        rule="+".join(rules),
        engine="; ".join(k.engine for k in kinds),
        what="kernel" if all(k.what == "kernel" for k in kinds) else "op",
        # Switchback runs only where every kernel found lets the overlay run.
        switchback=all(k.switchback for k in kinds),
        critical_ns=float(crit),
        own_ns=step_ns,
        share=crit / step_ns if step_ns else None,
        # One noise-drawing kernel keeps the figure a bound (a looser one: the noise-free kernels count in it).
        noise=any(k.noise for k in kinds),
    )


def noise_free(b: SamplingBound) -> list[FusedSampler]:
    """The samplers of ``b`` that draw no noise over the vocabulary: their time is a cost, nothing to save."""
    return [FUSED_SAMPLERS[r] for r in b.rule.split("+") if r in FUSED_SAMPLERS and not FUSED_SAMPLERS[r].noise]

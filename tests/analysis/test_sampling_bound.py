"""analysis/bound.py: the fused sampling kernel's bound, over hand-built Timelines with the real kernel names.

GIVEN Timelines whose figures are set by hand (GENERATED: a CUDA device cannot be traced here)
WHEN :func:`sampling_bound` reads their analysis THEN the bound is the headline's critical path per step over
the mean step window, exists only where every rank's draws are fused sampling kernels, and the saving line
says what it can (no share without step markers); where the kernels draw no noise over the vocabulary
(vllm-ascend's categorical_sample) the figure is a sampling cost and the line says nothing can be saved.
"""

from __future__ import annotations

import msgspec
import pytest

from expo_prof.analysis import analyze
from expo_prof.analysis.bound import sampling_bound
from expo_prof.analysis.model import SamplingBound
from expo_prof.pipeline.result import saving_line
from expo_prof.timeline import Kind

from analysis_helpers import EXP_KERNEL, STREAM, THREAD  # type: ignore[import-not-found]

LANES = [(THREAD, "cpu", "thread 1"), (STREAM, "cuda:0", "stream 7"), (STREAM, "cuda:0", "stream 20")]
GUMBEL = "_gumbel_sample_kernel"
PREPARE, CATEGORICAL = "_categorical_prepare_mass_kernel", "_categorical_sample_kernel"


def _rank(make_tl, rank: int, kernel: str, durs: list[int], step_len: int = 1000, markers: bool = True):
    """One step per duration: a ProfilerStep of ``step_len`` ns, a 600 ns forward, then ``kernel`` on stream 7."""
    ev = []
    for k, d in enumerate(durs):
        s = k * step_len
        if markers:
            ev.append((0, s, step_len, f"ProfilerStep#{k}", Kind.STEP))
        ev += [(1, s + 10, 600, "gemm", Kind.KERNEL), (1, s + 620, d, kernel, Kind.KERNEL)]
    return make_tl(LANES, ev, rank=rank)


def test_two_ranks_pool_their_steps(make_tl):
    # GIVEN two MRV2 ranks of 1 µs steps, the kernel 40 / 60 ns (rank 0) and 80 / 100 ns (rank 1), all exposed
    res = analyze([_rank(make_tl, 0, GUMBEL, [40, 60]), _rank(make_tl, 1, GUMBEL, [80, 100])])
    # WHEN bounded
    b = sampling_bound(res)
    # THEN critical per step is the mean over the four (rank, step) rows, the share that over the 1 µs step
    assert b is not None and b.rule == "mrv2-fused-gumbel" and not b.switchback
    assert b.critical_ns == pytest.approx(70.0) == res.summary.per_step.critical_ns.mean
    assert b.own_ns == pytest.approx(1000.0) and b.share == pytest.approx(0.07)
    assert "holds the critical path 70 ns/step (7.0 % of the step)" in saving_line([], None, b)


def test_no_bound_where_a_rank_draws_an_exponential(make_tl):
    # GIVEN one rank whose exponential kernel ran (the V1 path) beside an MRV2 rank
    res = analyze([_rank(make_tl, 0, EXP_KERNEL, [40]), _rank(make_tl, 1, GUMBEL, [40])])
    # THEN there is no bound, and the line is the plain "not measured"
    assert sampling_bound(res) is None
    assert "switchback -- CMD" in saving_line([], None, sampling_bound(res))


def test_no_bound_for_an_op(make_tl):
    # GIVEN the same MRV2 kernels analysed as --op
    res = analyze([_rank(make_tl, 0, GUMBEL, [40])], op="gumbel")
    # THEN the bound belongs to the sampler only
    assert sampling_bound(res) is None


def test_without_step_markers_the_share_is_unknown(make_tl):
    # GIVEN an MRV2 trace without step markers
    res = analyze([_rank(make_tl, 0, GUMBEL, [40, 40], markers=False)])
    b = sampling_bound(res)
    # THEN the share is unknown and the line says so instead of dividing by a guess
    assert b is not None and b.own_ns is None and b.share is None
    assert "share of the step unknown: no step markers" in saving_line([], None, b)


def test_categorical_kernels_are_a_cost_not_a_bound(make_tl):
    # GIVEN vllm-ascend's Model Runner V2 sampling with categorical_sample: the sample kernel 40 / 60 ns a step
    res = analyze([_rank(make_tl, 0, CATEGORICAL, [40, 60])])
    # WHEN bounded
    b = sampling_bound(res)
    # THEN the figure is the same critical path per step, but marked as drawing no noise: a cost
    assert b is not None and b.rule == "ascend-v2-categorical" and b.noise is False and not b.switchback
    assert b.critical_ns == pytest.approx(50.0) and b.share == pytest.approx(0.05)
    # AND the line says nothing can be saved and gives the cost, never a bound
    line = saving_line([], None, b)
    assert "so no async draw can save anything; sampling costs 50 ns/step on the critical path (5.0 % of the step)" \
        in line
    assert "could save" not in line and "switchback -- CMD" not in line


def test_a_noise_kernel_beside_categorical_ones_keeps_a_looser_bound(make_tl):
    # GIVEN one rank of vllm-ascend's Ascend Triton Gumbel kernel (noise inside) and one of categorical_sample
    res = analyze([_rank(make_tl, 0, GUMBEL, [40]), _rank(make_tl, 1, CATEGORICAL, [60])])
    b = sampling_bound(res)
    # THEN the figure still bounds what an async draw could save, over both, and the line says it is looser
    assert b is not None and b.noise is True and b.rule == "ascend-v2-categorical+mrv2-fused-gumbel"
    line = saving_line([], None, b)
    assert "holds the critical path 50 ns/step (5.0 % of the step): the most any async draw could save" in line
    assert line.endswith("it counts the kernels named above that draw no noise too, so it is a looser bound")


def test_a_bound_written_before_the_noise_field_reads_as_noise():
    # GIVEN a recordings[].bound of a document written before the noise field existed
    old = {"rule": "mrv2-fused-gumbel", "engine": "e", "what": "kernel", "switchback": False, "critical_ns": 1.0,
           "own_ns": 10.0, "share": 0.1}
    # THEN it decodes, as a noise-drawing sampler (all such documents were)
    assert msgspec.convert(old, SamplingBound).noise is True

"""analysis/bound.py: the fused sampling kernel's bound, over hand-built Timelines with the real kernel names.

GIVEN Timelines whose figures are set by hand (GENERATED: a CUDA device cannot be traced here)
WHEN :func:`sampling_bound` reads their analysis THEN the bound is the headline's critical path per step over
the mean step window, exists only where every rank's draws are fused sampling kernels, and the saving line
says what it can (no share without step markers).
"""

from __future__ import annotations

import pytest

from expo_prof.analysis import analyze
from expo_prof.analysis.bound import sampling_bound
from expo_prof.pipeline.result import saving_line
from expo_prof.timeline import Kind

from analysis_helpers import EXP_KERNEL, STREAM, THREAD  # type: ignore[import-not-found]

LANES = [(THREAD, "cpu", "thread 1"), (STREAM, "cuda:0", "stream 7"), (STREAM, "cuda:0", "stream 20")]
GUMBEL = "_gumbel_sample_kernel"


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
    assert b.step_ns == pytest.approx(1000.0) and b.share == pytest.approx(0.07)
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
    assert b is not None and b.step_ns is None and b.share is None
    assert "share of the step unknown: no step markers" in saving_line([], None, b)

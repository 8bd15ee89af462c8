"""Hidden/exposed pieces of each instance: they add up exactly to the analysis' totals."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof import readers
from expo_prof.analysis import intervals as iv
from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.analysis.overlap.pieces import instance_pieces, split_members


def _check(a):
    pcs = instance_pieces(a)
    h, e = pcs.totals(len(a))
    assert np.array_equal(h, a.hidden)
    assert np.array_equal(e, a.exposed)
    assert (pcs.end > pcs.start).all()
    # Every piece lies inside one member of its instance; pieces of an instance do not overlap.
    for k in range(len(pcs)):
        i = pcs.inst[k]
        m = a.inst.member_inst == i
        assert ((a.inst.member_start[m] <= pcs.start[k]) & (pcs.end[k] <= a.inst.member_end[m])).any()
    for i in np.unique(pcs.inst):
        sel = pcs.inst == i
        assert (pcs.start[sel][1:] >= pcs.end[sel][:-1]).all()
    return pcs


def test_pieces_match_analysis_on_real_vllm_cpu_trace(vllm_cpu_trace):
    """GIVEN the real vLLM CPU trace (inline draws) WHEN pieces are computed THEN they sum to the analysis' hidden/exposed."""
    tl = readers.load([vllm_cpu_trace]).timelines[0]
    a = analyze_timeline(tl)
    pcs = _check(a)
    assert len(a) == 32 and not pcs.hidden.any()  # inline: nothing hides


def test_pieces_match_analysis_on_real_gpu_trace_with_partial_overlap(nccl_trace):
    """GIVEN a real A100 trace, NCCL kernels partly under compute on another stream (--op nccl)
    WHEN pieces are computed THEN both hidden and exposed pieces exist and sum to the analysis' totals."""
    tl = readers.load([nccl_trace]).timelines[0]
    a = analyze_timeline(tl, re.compile("nccl"))
    pcs = _check(a)
    assert pcs.hidden.any() and (~pcs.hidden).any()


def test_pieces_match_analysis_on_recorded_run(run_on):
    """GIVEN a recorded run with the draw on a spare thread WHEN pieces are computed THEN they match the analysis."""
    for tl in readers.load([run_on / "profiler"]).timelines:
        _check(analyze_timeline(tl))


_iv = st.tuples(st.integers(0, 200), st.integers(0, 40)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_iv, max_size=12), st.lists(_iv, max_size=12))
def test_split_members_agrees_with_brute_force(busy_ivs, member_ivs):
    """GIVEN any busy intervals and disjoint members WHEN members are split THEN each nanosecond of a member is
    in exactly one piece, hidden exactly when some busy interval covers it."""
    busy = iv.union(np.array([s for s, _ in busy_ivs], np.int64), np.array([e for _, e in busy_ivs], np.int64))
    mu = iv.union(np.array([s for s, _ in member_ivs], np.int64), np.array([e for _, e in member_ivs], np.int64))
    m, s, e, h = split_members(mu.start, mu.end, busy)
    covered = np.zeros(300, bool)
    for bs, be in zip(busy.start, busy.end):
        covered[bs:be] = True
    seen = np.zeros(300, int)
    for mi, a, b, hid in zip(m, s, e, h):
        assert mu.start[mi] <= a < b <= mu.end[mi]
        seen[a:b] += 1
        assert (covered[a:b] == hid).all()
    for a, b in zip(mu.start, mu.end):
        assert (seen[a:b] == 1).all()

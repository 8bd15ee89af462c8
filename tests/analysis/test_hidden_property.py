"""Hidden time against a brute-force raster, on random multi-stream timelines (hypothesis).

GIVEN random kernels on three streams of one device (some of them draws,
others compute, copies or communication), WHEN analysed, THEN each draw's
hidden time equals the number of nanosecond cells in which it runs while a
compute kernel runs on another stream (a stream's own records during
its draw are that draw), and the wall view equals the cells in
which any draw runs (and, for hidden, any compute kernel on any stream).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.timeline import Kind

from analysis_helpers import EXP_KERNEL, STREAM, build_timeline  # type: ignore[import-not-found]

SPAN = 80
KINDS = [(Kind.KERNEL, "gemm"), (Kind.KERNEL, EXP_KERNEL), (Kind.MEMCPY, "Memcpy DtoD"), (Kind.COMM, "ncclKernel")]

event = st.tuples(st.integers(0, 2), st.integers(0, SPAN), st.integers(0, 25), st.integers(0, 3))


@settings(max_examples=300, deadline=None)
@given(st.lists(event, min_size=1, max_size=30))
def test_hidden_matches_raster(evs):
    lanes = [(STREAM, "cuda:0", f"stream {i}") for i in range(3)]
    tl = build_timeline(lanes, [(ln, s, d, KINDS[k][1], KINDS[k][0]) for ln, s, d, k in evs])
    a = analyze_timeline(tl)
    size = SPAN + 30
    compute = np.zeros((3, size), dtype=bool)  # non-draw compute kernels per stream
    draws_on = np.zeros((3, size), dtype=bool)
    for i in range(len(tl)):
        s, e, ln = int(tl.start[i]), int(tl.start[i] + tl.dur[i]), int(tl.lane[i])
        nm = tl.names[tl.name[i]]
        if tl.kind[i] == Kind.KERNEL and nm != EXP_KERNEL:
            compute[ln, s:e] = True
        if nm == EXP_KERNEL:
            draws_on[ln, s:e] = True
    # a stream does one thing at a time: what it records during its own draw is that draw
    compute &= ~draws_on
    draws = draws_on.any(axis=0)
    # per draw: cells of its (de-nested, clipped) members where another stream computes
    for j in range(len(a.inst)):
        ln = int(a.inst.lane[j])
        other = compute[[x for x in range(3) if x != ln]].any(axis=0)
        sel = a.inst.member_inst == j
        cells = np.zeros(size, dtype=bool)
        for s, e in zip(a.inst.member_start[sel], a.inst.member_end[sel]):
            cells[int(s) : int(e)] = True
        assert a.total[j] == cells.sum()
        assert a.hidden[j] == (cells & other).sum()
    # draws on one stream never nest or double count: their members tile what the draws cover
    assert a.wall == draws.sum()
    assert a.wall_hidden == (draws & compute.any(axis=0)).sum()
    assert (a.hidden >= 0).all() and (a.exposed >= 0).all()

"""Per-device views: a draw is hidden only by compute on its own device, in every view.

The wall/union view (``wall_ns`` / ``wall_hidden_ns``) is the figure compared
with HolisticTraceAnalysis; it must apply the same same-device rule as the
per-instance view, or a draw on one GPU "hides" under a GEMM on another.
"""

from __future__ import annotations

from expo_prof.analysis import analyze
from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.timeline import Kind

from analysis_helpers import EXP_KERNEL, STREAM  # type: ignore[import-not-found]

TWO_GPUS = [(STREAM, "cuda:0", "stream 7"), (STREAM, "cuda:0", "stream 20"),
            (STREAM, "cuda:1", "stream 7"), (STREAM, "cuda:1", "stream 20")]


def test_compute_on_another_device_hides_nothing_in_either_view(make_tl):
    # GIVEN a draw on cuda:0 and one on cuda:1, with compute only on the *other* GPU at each draw's time
    tl = make_tl(TWO_GPUS, [
        (1, 100, 100, EXP_KERNEL, Kind.KERNEL),   # draw on cuda:0 [100, 200)
        (2, 100, 100, "gemm", Kind.KERNEL),        # cuda:1 busy [100, 200)
        (3, 500, 80, EXP_KERNEL, Kind.KERNEL),    # draw on cuda:1 [500, 580)
        (0, 500, 80, "gemm", Kind.KERNEL),         # cuda:0 busy [500, 580)
    ])
    # WHEN analysed
    a = analyze_timeline(tl)
    r = analyze([tl])
    # THEN no nanosecond is hidden, per instance or in the union view
    assert a.hidden.tolist() == [0, 0]
    assert (a.wall, a.wall_hidden) == (180, 0)
    assert (r.summary.wall_ns, r.summary.wall_hidden_ns, r.summary.hidden_ns) == (180, 0, 0)


def test_union_view_equals_per_instance_view_when_draws_do_not_overlap(make_tl):
    # GIVEN draws on two GPUs, each partly under compute of its own GPU and fully under the other's
    tl = make_tl(TWO_GPUS, [
        (1, 0, 100, EXP_KERNEL, Kind.KERNEL),     # cuda:0 draw [0, 100)
        (0, 60, 100, "gemm", Kind.KERNEL),         # cuda:0 compute covers 40 ns of it
        (2, 0, 1000, "gemm", Kind.KERNEL),         # cuda:1 compute covers everything, on the wrong GPU
        (3, 300, 50, EXP_KERNEL, Kind.KERNEL),    # cuda:1 draw [300, 350): covered by cuda:1's gemm
        (0, 300, 50, "gemm", Kind.KERNEL),         # cuda:0 compute at the same time: not its device
    ])
    a = analyze_timeline(tl)
    # THEN per instance: 40 and 50 hidden; the union view sums the same 90 ns
    assert a.hidden.tolist() == [40, 50]
    assert (a.wall, a.wall_hidden) == (150, 90)

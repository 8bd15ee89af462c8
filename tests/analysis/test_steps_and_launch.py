"""Step windows, launch times, step assignment and the forward / wait spans (analysis/overlap/hidden.py).

GIVEN small hand-built Timelines whose markers, launches and spans are placed
by construction, WHEN the step machinery runs, THEN the windows, step ids,
launch times and per-step sums are the ones the docstrings of hidden.py state:
step column first, then ProfilerStep#N, then vLLM's execute_context
annotations (one lane's copy, numbered in order); windows reach the next
step's start and the last one the end of the trace; a kernel belongs to the
step that launched it.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from analysis_helpers import EXP_KERNEL, OVERLAY, STREAM, THREAD  # type: ignore[import-not-found]

from expo_prof.analysis.overlap.hidden import analyze_timeline, forward_span_rows, wait_rows

from expo_prof.analysis.steps.windows import Steps, assign_steps, launch_start, step_windows, union_by_step
from expo_prof.timeline import Kind, LaneKind

LANES = [(THREAD, "cpu", "main"), (STREAM, "cuda:0", "stream 7"), (STREAM, "cuda:0", "stream 20"),
         (THREAD, "cpu", "other"), (OVERLAY, "cpu", "overlay")]
VLLM = "execute_context_1(7)_generation_0(0)"


def _windows(st: Steps):
    return st.source, st.ids.tolist(), st.start.tolist(), st.end.tolist()


def test_vllm_annotations_of_the_busiest_lane_are_numbered_in_order(make_tl):
    # GIVEN execute_context annotations: 3 on the main thread, 2 copies on another thread, and a kernel to 900
    tl = make_tl(LANES, [
        (0, 0, 100, VLLM, Kind.ANNOTATION), (0, 300, 100, VLLM, Kind.ANNOTATION), (0, 500, 50, VLLM, Kind.ANNOTATION),
        (3, 10, 500, VLLM, Kind.ANNOTATION), (3, 600, 10, VLLM, Kind.ANNOTATION),
        (1, 800, 100, "gemm", Kind.KERNEL),
    ])
    # THEN the main thread's three mark steps 0, 1, 2; each window runs to the next start, the last to the trace end
    assert _windows(step_windows(tl)) == ("vllm-annotation", [0, 1, 2], [0, 300, 500], [300, 500, 900])


def test_profiler_steps_prefer_the_lane_kind_of_the_instances_and_merge_copies(make_tl):
    # GIVEN ProfilerStep#5/#6 on the host thread and device copies of #5 (twice) and #6 on a stream
    ev = [
        (0, 0, 1000, "ProfilerStep#5", Kind.STEP), (0, 1000, 500, "ProfilerStep#6", Kind.STEP),
        (1, 100, 300, "ProfilerStep#5", Kind.ANNOTATION), (1, 450, 200, "ProfilerStep#5", Kind.ANNOTATION),
        (1, 1200, 100, "ProfilerStep#6", Kind.ANNOTATION),
        (0, 40, 10, "ProfilerStep#5", Kind.CPU_OP),  # not a marker kind: ignored
    ]
    tl = make_tl(LANES, ev)
    # THEN with no preference the host and device copies merge per id (min start, max end), extended to the next step
    assert _windows(step_windows(tl)) == ("ProfilerStep", [5, 6], [0, 1000], [1000, 1500])
    # AND preferring streams keeps the device copies only: #5 = [100, 650) extended to #6's start 1200
    assert _windows(step_windows(tl, LaneKind.STREAM)) == ("ProfilerStep", [5, 6], [100, 1200], [1200, 1500])
    # AND a preference nobody matches falls back to all markers
    assert _windows(step_windows(tl, LaneKind.OVERLAY)) == ("ProfilerStep", [5, 6], [0, 1000], [1000, 1500])


def test_profiler_steps_win_over_vllm_annotations_and_the_last_window_ends_at_its_marker_or_later(make_tl):
    tl = make_tl(LANES, [(0, 0, 100, VLLM, Kind.ANNOTATION), (0, 200, 50, "ProfilerStep#3", Kind.STEP)])
    # THEN ProfilerStep decides; its window is [200, 250): the trace ends with it
    assert _windows(step_windows(tl)) == ("ProfilerStep", [3], [200], [250])


def test_step_column_uses_non_marker_rows_with_a_step(make_tl):
    # GIVEN a reader's step column: -1 (unknown) rows and STEP rows do not make windows
    ev = [(1, 0, 10, "a", Kind.KERNEL), (1, 20, 10, "b", Kind.KERNEL), (1, 100, 30, "c", Kind.KERNEL),
          (0, 0, 500, "Step 9", Kind.STEP), (1, 400, 10, "d", Kind.KERNEL)]
    # rows are sorted by (start, lane), so the column is given in the order Step 9, a, b, c, d
    tl = make_tl(LANES, ev, step=[9, 4, 4, 7, -1])
    assert [tl.names[i] for i in tl.name] == ["Step 9", "a", "b", "c", "d"]
    assert _windows(step_windows(tl)) == ("step-column", [4, 7], [0, 100], [30, 130])
    # AND with no marker of any kind there are no steps
    none = make_tl(LANES, [(1, 0, 10, "a", Kind.KERNEL)])
    assert _windows(step_windows(none)) == ("none", [], [], [])
    assert _windows(step_windows(make_tl(LANES, []))) == ("none", [], [], [])


def test_assign_steps_is_half_open_and_leaves_gaps_unassigned():
    st = Steps(np.array([4, 7]), np.array([100, 300]), np.array([200, 400]), "ProfilerStep")
    t = [99, 100, 199, 200, 250, 300, 399, 400, 10**12]
    assert assign_steps(st, t).tolist() == [-1, 4, 4, -1, -1, 7, 7, -1, -1]
    assert assign_steps(Steps(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64), "none"),
                        [5, 6]).tolist() == [-1, -1]


def test_launch_start_is_the_first_host_launch_of_each_correlation(make_tl):
    # GIVEN two launches with correlation 7 (at 50 and 80), one with 8, kernels 7, 8 and 9 (9 unlaunched)
    ev = [(0, 50, 5, "cudaLaunchKernel", Kind.RUNTIME), (0, 80, 5, "cudaLaunchKernel", Kind.RUNTIME),
          (0, 90, 5, "cudaLaunchKernel", Kind.RUNTIME), (1, 500, 10, "k7", Kind.KERNEL),
          (2, 600, 10, "k8", Kind.KERNEL), (1, 700, 10, "k9", Kind.KERNEL), (3, 95, 5, "cudaMemcpy", Kind.RUNTIME)]
    tl = make_tl(LANES, ev)
    tl.meta["correlation"] = np.array([7, 7, 8, 8, 7, 8, 9])  # by start: 50, 80, 90, 95, 500, 600, 700
    # THEN each kernel gets its first launch's time; host rows and unlaunched kernels keep their own start
    # (the runtime call at 95 on another thread also carries 8, later than the launch at 90)
    assert launch_start(tl).tolist() == [50, 80, 90, 95, 50, 90, 700]
    # AND without a usable correlation column there are no launch times
    tl.meta["correlation"] = np.array([7, 7])
    assert launch_start(tl) is None
    tl.meta["correlation"] = np.array([-1, -1, -1, -1, 7, 8, 9])  # no host launch has an id
    assert launch_start(tl) is None
    del tl.meta["correlation"]
    assert launch_start(tl) is None


def test_forward_span_and_wait_rows_take_one_lane_kind(make_tl):
    # GIVEN the forward span on the overlay lane and on a stream, a wait span on the overlay lane and a thread
    ev = [(4, 0, 100, "expo_prof::forward", Kind.OVERLAY), (1, 5, 90, "expo_prof::forward", Kind.ANNOTATION),
          (4, 100, 20, "expo_prof::wait", Kind.OVERLAY), (0, 100, 20, "expo_prof::wait", Kind.ANNOTATION),
          (0, 130, 20, "expo_prof::wait", Kind.CPU_OP),  # not a span kind
          (0, 0, 150, "gpu_model_runner: forward", Kind.ANNOTATION), (0, 0, 150, VLLM, Kind.ANNOTATION)]
    tl = make_tl(LANES, ev)
    names = lambda rows: [(int(tl.lane[i]), tl.names[tl.name[i]]) for i in rows]  # noqa: E731
    # THEN device copies beat overlay ones, overlay beats host
    assert names(forward_span_rows(tl, "expo_prof::forward")) == [(1, "expo_prof::forward")]
    assert names(wait_rows(tl)) == [(4, "expo_prof::wait")]
    assert names(forward_span_rows(tl, "gpu_model_runner: forward")) == [(0, "gpu_model_runner: forward")]
    assert names(forward_span_rows(tl, "execute_context")) == [(0, VLLM)]


def test_forward_source_order_and_wait_per_step(make_tl):
    # GIVEN a draw inside the overlay forward span, a vLLM runner span, waits in two ProfilerSteps
    ev = [(0, 0, 1000, "ProfilerStep#1", Kind.STEP), (0, 1000, 1000, "ProfilerStep#2", Kind.STEP),
          (2, 100, 50, EXP_KERNEL, Kind.KERNEL),
          (0, 0, 400, "expo_prof::forward", Kind.ANNOTATION), (0, 1000, 300, "expo_prof::forward", Kind.ANNOTATION),
          (0, 0, 900, "gpu_model_runner: forward", Kind.ANNOTATION),
          (0, 400, 30, "expo_prof::wait", Kind.ANNOTATION), (0, 420, 30, "expo_prof::wait", Kind.ANNOTATION),
          (0, 1300, 5, "expo_prof::wait", Kind.ANNOTATION)]
    a = analyze_timeline(make_tl(LANES, ev))
    # THEN the overlay's own forward span wins, summed per step; waits are unioned per step ([400, 450) = 50)
    assert a.forward_source == "expo_prof::forward" and a.forward_by_step == {1: 400, 2: 300}
    assert a.wait_by_step == {1: 50, 2: 5} and a.wait_total == 55
    # AND without it the vLLM runner span is next
    b = analyze_timeline(make_tl(LANES, [e for e in ev if e[3] != "expo_prof::forward"]))
    assert b.forward_source == "gpu_model_runner: forward" and b.forward_by_step == {1: 900}


def test_compute_busy_forward_without_instances_uses_the_device_or_the_host(make_tl):
    # GIVEN no draw at all: forward falls back to compute busy time on streams when kernels exist ...
    a = analyze_timeline(make_tl(LANES, [(0, 0, 1000, "ProfilerStep#1", Kind.STEP), (1, 10, 100, "gemm", Kind.KERNEL),
                                         (0, 5, 500, "aten::mm", Kind.CPU_OP)]))
    assert len(a) == 0 and a.forward_source == "compute-busy" and a.forward_by_step == {1: 100}
    assert (a.wall, a.wall_hidden) == (0, 0)
    # ... and on host threads (operators) when there is no device kernel
    b = analyze_timeline(make_tl(LANES, [(0, 0, 1000, "ProfilerStep#1", Kind.STEP), (0, 5, 500, "aten::mm", Kind.CPU_OP)]))
    assert b.forward_by_step == {1: 500}


def test_union_by_step_counts_overlaps_once_per_step():
    sid = np.array([1, 1, 2, 1])
    s = np.array([0, 5, 0, 20])
    e = np.array([10, 15, 7, 20])  # the last one is empty
    assert union_by_step(sid, s, e) == {1: 15, 2: 7}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 4), st.integers(0, 60), st.integers(-3, 20)), max_size=40))
def test_union_by_step_matches_a_raster_per_step(rows):
    # GIVEN random intervals tagged with steps (empty and reversed ones included, in any order)
    sid = np.array([r[0] for r in rows], dtype=np.int64)
    s = np.array([r[1] for r in rows], dtype=np.int64)
    e = s + np.array([r[2] for r in rows], dtype=np.int64)
    # WHEN measured per step THEN each step's figure is its count of covered ns cells
    want = {}
    for step in sorted(set(sid.tolist())):
        cells = {t for i in np.flatnonzero(sid == step) for t in range(int(s[i]), int(e[i]))}
        want[step] = len(cells)
    assert union_by_step(sid, s, e) == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 4), st.integers(-10**15, 10**15), st.integers(-3, 10**6)), max_size=40),
       st.booleans())
def test_measure_by_segment_equals_a_union_per_segment(rows, per_segment):
    # GIVEN intervals tagged with segments, far apart in time (the stretches laid side by side, or, when the
    # limit is lowered, the fallback that merges per segment)
    from expo_prof.analysis import intervals as iv

    seg = np.array([r[0] for r in rows], dtype=np.int64)
    s = np.array([r[1] for r in rows], dtype=np.int64)
    e = s + np.array([r[2] for r in rows], dtype=np.int64)
    old = iv.STRETCH_LIMIT
    iv.STRETCH_LIMIT = 0.0 if per_segment else old
    try:
        ids, got = iv.measure_by_segment(seg, s, e)
    finally:
        iv.STRETCH_LIMIT = old
    # THEN each segment measures what a union of its own intervals measures
    assert ids.tolist() == sorted(set(seg.tolist()))
    assert got.tolist() == [iv.union(s[seg == k], e[seg == k]).measure for k in ids.tolist()]

"""Edge cases of analysis/overlap/hidden.py that mutation testing showed no other test pinned down.

GIVEN small hand-built Timelines (analysis_helpers.build_timeline), WHEN the
step and hidden-time functions run, THEN the results are the ones the
docstrings of hidden.py state, including the tie-breaks that make them
deterministic.
"""

from __future__ import annotations

import re

import numpy as np
from analysis_helpers import EXP_KERNEL, OVERLAY, STREAM, THREAD  # type: ignore[import-not-found]

from expo_prof.analysis.overlap.hidden import analyze_timeline

from expo_prof.analysis.steps.windows import Steps, assign_steps, launch_start, step_windows
from expo_prof.analysis.targets import SPAN_FORWARD
from expo_prof.timeline import Kind

LANES = [(THREAD, "cpu", "main"), (STREAM, "cuda:0", "stream 7")]


def test_step_windows_sharing_a_start_are_ordered_by_step_id(make_tl):
    # GIVEN a step column with 8 steps whose first events share starts, later ids often starting earlier
    starts = [100, 200, 300, 300, 0, 0, 300, 300]  # step i starts at starts[i]
    ev = [(1, s, 10, f"k{i}", Kind.KERNEL) for i, s in enumerate(starts)]
    order = sorted(range(len(ev)), key=lambda j: (ev[j][1], ev[j][0]))  # build_timeline sorts by (start, lane)
    tl = make_tl(LANES, ev, step=[j for j in order])
    # WHEN the windows are built
    st = step_windows(tl)
    # THEN they are sorted by start and, within one start, by step id: one deterministic order
    assert st.source == "step-column"
    assert st.ids.tolist() == [4, 5, 0, 1, 2, 3, 6, 7]
    assert st.start.tolist() == [0, 0, 100, 200, 300, 300, 300, 300]
    # AND a time at a shared start goes to the highest id starting there, every time
    assert assign_steps(st, np.array([0, 105, 300])).tolist() == [5, 0, 7]


def test_assign_steps_compares_epoch_times_exactly_whatever_their_integer_type():
    # GIVEN a window that starts 1 ns after an epoch-scale time (float64 cannot tell them apart: spacing 256 ns)
    t0 = 1_700_000_000_000_000_000
    st = Steps(np.array([4]), np.array([t0 + 1]), np.array([t0 + 1_000]), "ProfilerStep")
    # WHEN times 1 ns before and at the start are given as uint64 (as an unsigned column would hold them)
    got = assign_steps(st, np.array([t0, t0 + 1, t0 + 999, t0 + 1_000], dtype=np.uint64))
    # THEN they are compared as exact integers: before the window, in it, in it, at its (open) end
    assert got.tolist() == [-1, 4, 4, -1]


def test_correlation_id_zero_links_a_kernel_to_its_launch(make_tl):
    # GIVEN launches with correlation ids 0 and 1 on the host thread, kernels 0 and 1, and a kernel without an id (-1)
    ev = [(0, 10, 5, "cudaLaunchKernel", Kind.RUNTIME), (0, 20, 5, "cudaLaunchKernel", Kind.RUNTIME),
          (1, 300, 10, "k0", Kind.KERNEL), (1, 400, 10, "k1", Kind.KERNEL), (1, 500, 10, "kx", Kind.KERNEL)]
    tl = make_tl(LANES, ev)
    tl.meta["correlation"] = np.array([0, 1, 0, 1, -1])
    # WHEN launch times are looked up
    got = launch_start(tl)
    # THEN only negative ids mean "no id": id 0 links like any other, kernel 0 gets the launch at 10;
    # the kernel without an id keeps its own start
    assert got is not None
    assert got.tolist() == [10, 20, 10, 20, 500]


def test_a_step_column_holding_only_step_zero_makes_one_int64_window(make_tl):
    # GIVEN a reader's step column in which every event belongs to step 0 (a one-step capture)
    tl = make_tl(LANES, [(1, 0, 10, "a", Kind.KERNEL), (1, 50, 20, "b", Kind.KERNEL)], step=[0, 0])
    # WHEN the windows are built
    st = step_windows(tl)
    # THEN step 0 is a step like any other: one window [0, 70) with an int64 id
    assert (st.source, st.ids.tolist(), st.start.tolist(), st.end.tolist()) == ("step-column", [0], [0], [70])
    assert st.ids.dtype == np.int64 and st.start.dtype == np.int64 and st.end.dtype == np.int64


def test_no_steps_are_empty_int64_windows(make_tl):
    # GIVEN Timelines with no marker of any kind (one kernel), and an empty one
    for tl in (make_tl(LANES, [(1, 0, 10, "a", Kind.KERNEL)]), make_tl(LANES, [])):
        # WHEN the windows are built
        st = step_windows(tl)
        # THEN there are none, as int64 arrays (the same dtypes as real windows), and the source says so
        assert st.source == "none" and len(st) == 0
        assert st.ids.dtype == np.int64 and st.start.dtype == np.int64 and st.end.dtype == np.int64



def test_hidden_and_exposed_are_int64_nanoseconds(make_tl):
    # GIVEN a draw on one stream half covered by a kernel on another stream of the same device
    lanes = [(STREAM, "cuda:0", "stream 7"), (STREAM, "cuda:0", "stream 20")]
    tl = make_tl(lanes, [(0, 0, 100, EXP_KERNEL, Kind.KERNEL), (1, 50, 100, "gemm", Kind.KERNEL)])
    # WHEN it is analysed
    a = analyze_timeline(tl)
    # THEN 50 ns are hidden and 50 exposed, as exact int64 nanoseconds (not floats)
    assert a.hidden.tolist() == [50] and a.exposed.tolist() == [50]
    assert a.hidden.dtype == np.int64 and a.exposed.dtype == np.int64
    assert (a.wall, a.wall_hidden) == (100, 50)
    # AND the one compute kernel measures the forward; with no wait span the wait is unknown, not zero
    assert (a.forward_measured, a.wait_measured) == (True, False)
    # AND a lone draw has neither: nothing measures its forward
    lone = analyze_timeline(make_tl(lanes, [(0, 0, 100, EXP_KERNEL, Kind.KERNEL)]))
    assert (lone.forward_measured, lone.wait_measured, lone.forward_by_step) == (False, False, {})


def test_a_timeline_without_targets_has_no_wall_time(make_tl):
    # GIVEN compute kernels but no draw
    tl = make_tl(LANES, [(1, 0, 100, "gemm", Kind.KERNEL), (1, 200, 50, "gemm", Kind.KERNEL)])
    # WHEN it is analysed
    a = analyze_timeline(tl)
    # THEN there are no instances, and the union view is empty: 0 ns wall, 0 ns hidden
    assert len(a) == 0 and a.hidden.tolist() == []
    assert (a.wall, a.wall_hidden) == (0, 0)
    # AND the forward time is still the device's compute busy time (outside any step: no markers)
    assert (a.forward_source, a.forward_by_step, a.forward_measured) == ("compute-busy", {-1: 150}, True)


def test_a_host_only_timeline_without_targets_measures_the_forward_on_the_threads(make_tl):
    # GIVEN CPU operators on two host threads, no device kernel and no draw
    lanes = [(THREAD, "cpu", "main"), (THREAD, "cpu", "other")]
    tl = make_tl(lanes, [(0, 0, 100, "aten::mm", Kind.CPU_OP), (1, 50, 100, "aten::add", Kind.CPU_OP)])
    # WHEN it is analysed
    a = analyze_timeline(tl)
    # THEN the forward time is the host threads' busy time (their union), not the (absent) device's
    assert len(a) == 0
    assert (a.forward_source, a.forward_by_step) == ("compute-busy", {-1: 150})


def test_an_overlay_window_is_not_hidden_by_a_forward_span_of_a_host_thread(make_tl):
    # GIVEN an overlay-log draw window, the log's forward window, and the trace's own expo_prof::forward span on a
    # host thread (trace and log of one run analysed together) reaching further than the log's window
    lanes = [(OVERLAY, "cpu", "overlay exponential"), (OVERLAY, "cpu", "overlay forward"), (THREAD, "cpu", "t")]
    tl = make_tl(lanes, [
        (0, 100, 100, "exponential", Kind.OVERLAY),
        (1, 0, 140, "forward", Kind.OVERLAY),  # hides [100, 140)
        (2, 0, 200, SPAN_FORWARD, Kind.ANNOTATION),  # a host span, not an overlay window: not busy for the log
    ], fmt="overlay-log", backend="cpu")
    # WHEN it is analysed
    a = analyze_timeline(tl)
    # THEN only the overlay lane's forward window hides the draw
    assert a.total.tolist() == [100] and a.hidden.tolist() == [40]


def test_steps_from_a_step_column_are_int64_ids_per_instance_and_exact_keys_per_step(make_tl):
    # GIVEN a step column with two huge neighbouring step ids (2**53 and 2**53 + 1: one float64 for both),
    # a draw in each step and a wait window in each
    big = 2**53
    lanes = [(STREAM, "cuda:0", "stream 7"), (OVERLAY, "cpu", "overlay")]
    ev = [(0, 0, 10, EXP_KERNEL, Kind.KERNEL), (1, 20, 30, "wait", Kind.OVERLAY),
          (0, 100, 10, EXP_KERNEL, Kind.KERNEL), (1, 120, 40, "wait", Kind.OVERLAY)]
    tl = make_tl(lanes, ev, step=[big, big, big + 1, big + 1])
    # WHEN it is analysed
    a = analyze_timeline(tl)
    # THEN each draw carries its exact step id as int64, and the wait is summed under each exact id
    assert a.step.dtype == np.int64 and a.step.tolist() == [big, big + 1]
    assert a.wait_by_step == {big: 30, big + 1: 40}


def test_spans_in_a_step_column_go_to_their_own_step_even_where_windows_overlap(make_tl):
    # GIVEN a step column in which step 1 runs [0, 300) and step 2 [100, 200) (pipelined steps overlap),
    # and a wait window of step 1 at [150, 160), inside step 2's window too
    lanes = [(STREAM, "cuda:0", "stream 7"), (OVERLAY, "cpu", "overlay")]
    ev = [(0, 0, 300, "gemm", Kind.KERNEL), (0, 100, 100, "gemm", Kind.KERNEL), (1, 150, 10, "wait", Kind.OVERLAY)]
    tl = make_tl(lanes, ev, step=[1, 2, 1])  # rows by start: 0 (step 1), 100 (step 2), 150 (step 1)
    # WHEN it is analysed
    a = analyze_timeline(tl)
    # THEN the column decides: the wait belongs to step 1, not to the window that happens to contain it
    assert a.steps.source == "step-column"
    assert a.wait_by_step == {1: 10}
    # AND one wait window is enough for the wait to count as measured
    assert a.wait_measured is True


def test_device_draws_use_the_device_copies_of_step_markers_unless_launch_times_decide(make_tl):
    # GIVEN ProfilerStep#1/#2 on the host thread ([0, 1000), [1000, 2000)) and their device copies on the stream,
    # late by 100 ns ([100, 1100), [1100, 2000)), and a draw on the stream at 1080, launched by the host at 1050
    ev = [(0, 0, 1000, "ProfilerStep#1", Kind.STEP), (0, 1000, 1000, "ProfilerStep#2", Kind.STEP),
          (1, 100, 1000, "ProfilerStep#1", Kind.ANNOTATION), (1, 1100, 900, "ProfilerStep#2", Kind.ANNOTATION),
          (0, 1050, 5, "cudaLaunchKernel", Kind.RUNTIME), (1, 1080, 10, EXP_KERNEL, Kind.KERNEL)]
    tl = make_tl(LANES, ev)
    # WHEN analysed without correlation ids
    a = analyze_timeline(tl)
    # THEN the device's own copies place the device draw: it ran inside device step 1
    assert a.step.tolist() == [1] and a.steps.start.tolist() == [100, 1100]
    # AND WHEN the launch is linked by a correlation id, THEN the host's markers and the launch time decide: step 2
    names = [tl.names[i] for i in tl.name]
    tl.meta["correlation"] = np.array([5 if n in ("cudaLaunchKernel", EXP_KERNEL) else -1 for n in names])
    b = analyze_timeline(tl)
    assert b.step.tolist() == [2] and b.steps.start.tolist() == [0, 1000]


def test_the_forward_of_host_draws_is_the_host_busy_time_even_with_device_kernels(make_tl):
    # GIVEN a draw on a host thread, an operator on another thread, and a (longer) kernel on a device stream
    lanes = [(THREAD, "cpu", "sampler"), (THREAD, "cpu", "worker"), (STREAM, "cuda:0", "stream 7")]
    tl = make_tl(lanes, [(0, 100, 50, "aten::exponential_", Kind.CPU_OP), (1, 0, 120, "aten::mm", Kind.CPU_OP),
                         (2, 0, 500, "gemm", Kind.KERNEL)])
    # WHEN it is analysed with --op exponential (no forward span: the forward is the compute busy time)
    a = analyze_timeline(tl, re.compile("exponential"))
    # THEN compute is measured where the draws run, on the host threads: the operator's 120 ns, not the kernel's 500
    assert len(a) == 1 and a.hidden.tolist() == [20]
    assert (a.forward_source, a.forward_by_step) == ("compute-busy", {-1: 120})


def test_profiler_step_zero_is_a_step(make_tl):
    # GIVEN ProfilerStep#0 and #1 markers (the profiler numbers steps from 0)
    tl = make_tl(LANES, [(0, 0, 100, "ProfilerStep#0", Kind.STEP), (0, 100, 100, "ProfilerStep#1", Kind.STEP)])
    # WHEN the windows are built, THEN step 0 has its window like step 1
    st = step_windows(tl)
    assert (st.source, st.ids.tolist(), st.start.tolist(), st.end.tolist()) == ("ProfilerStep", [0, 1], [0, 100], [100, 200])

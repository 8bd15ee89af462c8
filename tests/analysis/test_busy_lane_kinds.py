"""What counts as compute for an instance, per lane kind (analysis/overlap/hidden.py ``busy_mask`` / ``busy_lanes``).

GIVEN hand-built Timelines with one instance on a profiler-derived (LOGICAL)
lane, on a host thread, and on the overlay lane, and busy work placed by
construction, WHEN analysed, THEN hidden time is the coverage by exactly the
work the module docstring names: every stream of the device for a LOGICAL
lane; operators and annotations on *other* threads (not the overlay's own
spans) for a thread; forward windows for the overlay lane.
"""

from __future__ import annotations

import re

from analysis_helpers import LOGICAL, OVERLAY, STREAM, THREAD  # type: ignore[import-not-found]

from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.timeline import Kind


def test_hccl_op_on_a_logical_lane_is_hidden_by_kernels_on_every_stream(make_tl):
    lanes = [(STREAM, "npu:0", "Stream 2"), (LOGICAL, "npu:0", "HCCL"), (STREAM, "npu:0", "Stream 3"),
             (STREAM, "npu:1", "Stream 2")]
    tl = make_tl(lanes, [
        (1, 0, 100, "hcom_allReduce_1", Kind.COMM),
        (0, 0, 30, "MatMul", Kind.KERNEL),  # [0, 30)
        (2, 20, 30, "Add", Kind.KERNEL),  # [20, 50): with the MatMul, [0, 50)
        (0, 60, 10, "hcom copy task", Kind.COMM),  # communication is not compute
        (3, 0, 100, "MatMul other npu", Kind.KERNEL),  # another device
    ], backend="npu", fmt="ascend-trace-view")
    a = analyze_timeline(tl, re.compile("hcom_"))
    assert a.total.tolist() == [100] and a.hidden.tolist() == [50]
    assert (a.wall, a.wall_hidden) == (100, 50)


def test_host_draw_is_hidden_by_other_threads_ops_but_not_by_overlay_spans(make_tl):
    lanes = [(THREAD, "cpu", "worker"), (THREAD, "cpu", "sampler")]
    tl = make_tl(lanes, [
        (1, 100, 100, "aten::exponential_", Kind.CPU_OP),  # the draw on the sampler thread
        (0, 0, 130, "aten::mm", Kind.CPU_OP),  # hides [100, 130)
        (0, 150, 20, "gpu_model_runner: forward", Kind.ANNOTATION),  # hides [150, 170)
        (0, 170, 30, "expo_prof::wait", Kind.ANNOTATION),  # the overlay's own span: not busy
        (0, 180, 20, "cudaLaunchKernel", Kind.RUNTIME),  # runtime calls are not operators
        (1, 120, 50, "aten::add", Kind.CPU_OP),  # same thread: the draw itself
    ], backend="cpu")
    a = analyze_timeline(tl)
    assert a.total.tolist() == [100] and a.hidden.tolist() == [50] and a.exposed.tolist() == [50]
    assert (a.wall, a.wall_hidden) == (100, 50)


def test_overlay_window_is_hidden_by_forward_windows_only(make_tl):
    lanes = [(OVERLAY, "cpu", "overlay exponential"), (OVERLAY, "cpu", "overlay forward"), (THREAD, "cpu", "t")]
    tl = make_tl(lanes, [
        (0, 100, 100, "exponential", Kind.OVERLAY),
        (1, 0, 140, "forward", Kind.OVERLAY),  # hides [100, 140)
        (1, 180, 50, "wait", Kind.OVERLAY),  # a wait window is not compute
        (2, 100, 100, "aten::mm", Kind.CPU_OP),  # host ops do not count for overlay windows
    ], fmt="overlay-log", backend="cpu")
    a = analyze_timeline(tl)
    assert a.total.tolist() == [100] and a.hidden.tolist() == [40]

"""Hidden vs exposed time, steps, wait and the roll-ups.

GIVEN small Timelines whose overlaps are known by construction (or an overlay
event log written in the documented format and read by the real reader), WHEN
analysed, THEN every nanosecond lands where docs/json-output.md says.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from expo_prof.analysis import analyze
from expo_prof.analysis.dists import dist
from expo_prof.analysis.overlap.hidden import analyze_timeline
from expo_prof.timeline import Kind

from analysis_helpers import EXP_KERNEL, STREAM, THREAD  # type: ignore[import-not-found]

LANES = [(THREAD, "cpu", "main"), (STREAM, "cuda:0", "stream 7"), (STREAM, "cuda:0", "stream 20"), (STREAM, "cuda:1", "stream 7")]


def test_hidden_is_coverage_by_other_streams_of_the_same_device(make_tl):
    # GIVEN a draw [100, 200) on stream 20 and, elsewhere:
    tl = make_tl(
        LANES,
        [
            (2, 100, 100, EXP_KERNEL, Kind.KERNEL),
            (1, 50, 80, "gemm", Kind.KERNEL),  # stream 7 covers [100,130): 30 hidden
            (1, 120, 5, "nested", Kind.KERNEL),  # nested inside the gemm: adds nothing
            (1, 130, 20, "touching", Kind.KERNEL),  # touches the gemm: [130,150) 20 more
            (1, 160, 10, "Memcpy HtoD", Kind.MEMCPY),  # a copy is not compute
            (1, 170, 10, "ncclKernel_AllReduce", Kind.COMM),  # communication is not compute
            (2, 210, 50, "after on same stream", Kind.KERNEL),  # same stream: never hides it
            (3, 100, 100, "gemm on another GPU", Kind.KERNEL),  # other device: not this draw's device
            (0, 100, 100, "aten::mm", Kind.CPU_OP),  # the host thread is not a device lane
        ],
    )
    a = analyze_timeline(tl)
    # THEN hidden = 30 + 20, exposed = the rest
    assert a.total.tolist() == [100]
    assert a.hidden.tolist() == [50]
    assert a.exposed.tolist() == [50]


def test_other_draws_do_not_hide_a_draw(make_tl):
    # GIVEN two draws overlapping each other on two streams, and a gemm under half of the first
    tl = make_tl(
        LANES,
        [(1, 0, 100, EXP_KERNEL, Kind.KERNEL), (2, 50, 100, EXP_KERNEL, Kind.KERNEL), (1, 200, 0, "empty", Kind.KERNEL),
         (3, 0, 10, "gemm other device", Kind.KERNEL), (2, 0, 50, "gemm", Kind.KERNEL)],
    )
    r = analyze([tl])
    # THEN only compute hides: 50 ns of the first draw, none of the second
    assert (r.summary.total_ns, r.summary.hidden_ns, r.summary.exposed_ns) == (200, 50, 150)
    # AND the union view counts the overlapped 50 ns of the two draws once
    assert (r.summary.wall_ns, r.summary.wall_hidden_ns) == (150, 50)


def test_cpu_draw_is_hidden_by_other_threads_only(make_tl):
    # GIVEN the overlay's CPU lane: q drawn on a spare thread while the worker thread runs the forward
    tl = make_tl(
        [(THREAD, "cpu", "worker"), (THREAD, "cpu", "spare")],
        [
            (0, 0, 1000, "execute_context_0(0)_generation_4(4)", Kind.ANNOTATION),
            (0, 10, 500, "aten::linear", Kind.CPU_OP),
            (1, 400, 800, "expo_prof::exponential", Kind.ANNOTATION),
            (1, 410, 780, "aten::exponential_", Kind.CPU_OP),
            (0, 1100, 200, "expo_prof::wait", Kind.ANNOTATION),
        ],
        backend="cpu",
    )
    r = analyze([tl])
    # THEN the span (not the op inside it) is the draw; the worker's annotation covers [400, 1000)
    # while its wait span [1100, 1300) is not busy time
    assert r.ranks[0].rule == "host-span"
    assert (r.summary.total_ns, r.summary.hidden_ns) == (800, 600)
    # AND the wait and the forward (vLLM's step annotation) are reported for the step
    (step,) = r.steps
    assert (step.step, step.wait_ns, step.forward_ns) == (0, 200, 1000)
    assert r.ranks[0].forward_source == "execute_context"


def test_inline_cpu_draw_is_fully_exposed(make_tl):
    # GIVEN vLLM's inline sampler: the draw runs on the only thread, after the forward
    tl = make_tl(
        [(THREAD, "cpu", "worker")],
        [(0, 0, 100, "aten::linear", Kind.CPU_OP), (0, 100, 30, "aten::exponential_", Kind.CPU_OP)],
        backend="cpu",
    )
    r = analyze([tl])
    assert (r.summary.hidden_ns, r.summary.exposed_ns, r.summary.hidden_fraction) == (0, 30, 0.0)


def test_steps_profilerstep_and_launch_time(make_tl):
    # GIVEN two ProfilerSteps; the draw of step 1 is launched in step 1 but runs on the device
    # after step 2 began (device lag), linked by a correlation id
    ev = [
        (0, 0, 1000, "ProfilerStep#1", Kind.STEP),
        (0, 1000, 1000, "ProfilerStep#2", Kind.STEP),
        (0, 900, 5, "cudaLaunchKernel", Kind.RUNTIME),
        (2, 1200, 100, EXP_KERNEL, Kind.KERNEL),
        (0, 1500, 5, "cudaLaunchKernel", Kind.RUNTIME),
        (2, 1600, 50, EXP_KERNEL, Kind.KERNEL),
        (1, 1000, 1000, "gemm", Kind.KERNEL),
    ]
    tl = make_tl(LANES, ev)
    corr = np.full(len(tl), -1, dtype=np.int64)
    # events are sorted by start: 0 PS1, 1 launch@900, 2 PS2, 3 gemm@1000, 4 exp@1200, 5 launch@1500, 6 exp@1600
    corr[[1, 4]] = 7
    corr[[5, 6]] = 8
    tl.meta["correlation"] = corr
    r = analyze([tl])
    # THEN each draw belongs to the step that launched it
    assert [(s.step, s.instances, s.total_ns, s.hidden_ns) for s in r.steps] == [(1, 1, 100, 100), (2, 1, 50, 50)]
    # AND forward falls back to the compute busy time, by launch step (the gemm has no launch: device time)
    assert r.ranks[0].forward_source == "compute-busy"


def test_step_column_wins_and_percentiles_are_nearest_rank(make_tl):
    # GIVEN an Ascend-style kernel table whose rows carry their step id
    ev = [(1, 100 * i, 10 + i, EXP_KERNEL, Kind.KERNEL) for i in range(10)]
    tl = make_tl(LANES, ev, fmt="ascend-kernel-csv", backend="npu", step=[i // 5 for i in range(10)])
    r = analyze([tl])
    assert [(s.step, s.instances, s.total_ns) for s in r.steps] == [(0, 5, 60), (1, 5, 85)]
    d = r.ranks[0].per_instance.total_ns
    # THEN p50/p99 are observed values (nearest rank), mean the arithmetic mean
    assert (d.n, d.p50, d.p99, d.max, d.mean) == (10, 14, 19, 19, 14.5)
    assert dist([]).n == 0 and dist([5]).p99 == 5


def test_overlay_event_log_through_the_real_reader(tmp_path):
    # GIVEN an overlay event log as docs/event-log.md specifies (CPU thread lane, host timing)
    lines = [
        {"type": "header", "schema": 1, "pid": 1, "host": "h", "rank": 3, "backend": "cpu", "lane": "thread",
         "instrument": True, "run_id": None, "versions": {}, "clock": "monotonic", "mono_ns": 0, "wall_ns": 0},
        # exp [100, 400) under the model's busy window [0, 400): the forward [0, 300), then the logits and
        # the sampler's own work until it starts to wait at 400: all 300 hidden; wait [400, 450)
        {"type": "step", "step": 0, "rank": 3, "rows": 4, "vocab": 32, "dtype": "float32", "launched": True, "used": True,
         "fallback": None, "t0_ns": 1_000, "fwd": [0, 300], "exp": [100, 400], "wait": [400, 450], "timing": "host"},
        # exp entirely under fwd: fully hidden, zero wait
        {"type": "step", "step": 1, "rank": 3, "rows": 4, "vocab": 32, "dtype": "float32", "launched": True, "used": True,
         "fallback": None, "t0_ns": 10_000, "fwd": [0, 500], "exp": [10, 110], "wait": [500, 500], "timing": "host"},
        # all greedy: nothing launched
        {"type": "step", "step": 2, "rank": 3, "rows": 0, "vocab": 0, "dtype": "float32", "launched": False, "used": False,
         "fallback": "all_greedy", "t0_ns": 20_000, "fwd": [0, 100], "exp": None, "wait": None, "timing": "host"},
        {"type": "summary", "steps": 3, "launched": 2, "used": 2, "fallbacks": {"all_greedy": 1}, "t_ns": 30_000},
    ]
    p = tmp_path / "expo-prof-events-h-1.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    from expo_prof.readers import load

    # WHEN read and analysed
    r = analyze(load([p]).timelines)
    # THEN the draws, hidden part and waits are the log's windows
    assert r.ranks[0].rank == 3 and r.ranks[0].rule == "overlay-log"
    assert [(s.step, s.total_ns, s.hidden_ns, s.wait_ns, s.forward_ns, s.critical_ns) for s in r.steps] == [
        (0, 300, 300, 50, 300, 50),
        (1, 100, 100, 0, 500, 0),
    ]
    assert (r.summary.hidden_ns, r.summary.exposed_ns, r.summary.wait_ns, r.summary.critical_ns) == (400, 0, 50, 50)


def test_a_draw_still_running_while_the_sampler_waits_is_paid_once(tmp_path):
    # GIVEN a step whose draw [100, 500) outlasts the model's work: the sampler waits [400, 520) for it
    lines = [
        {"type": "header", "schema": 2, "pid": 1, "host": "h", "rank": 0, "backend": "cpu", "lane": "thread",
         "instrument": True, "run_id": None, "versions": {}, "clock": "monotonic", "mono_ns": 0, "wall_ns": 0},
        {"type": "step", "step": 0, "rank": 0, "rows": 4, "vocab": 32, "dtype": "float32", "launched": True,
         "used": True, "fallback": None, "t0_ns": 1_000, "fwd": [0, 300], "exp": [100, 500], "wait": [400, 520],
         "sample": [350, 560], "host_end": 560, "phase": "on", "block": None, "reqs": 4, "tokens": 4,
         "timing": "host"},
    ]
    p = tmp_path / "expo-prof-events-h-1.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    from expo_prof.readers import load

    # WHEN read and analysed
    (st,) = analyze(load([p]).timelines).steps
    # THEN [400, 500) of the draw is exposed (the model waits, nothing covers it): 100 ns, and the wait is 120 ns;
    # the critical path is their union [400, 520) = 120 ns, not the sum 220 ns
    assert (st.hidden_ns, st.exposed_ns, st.wait_ns, st.critical_ns) == (300, 100, 120, 120)


def test_same_rank_from_two_exports_is_counted_once(make_tl):
    # GIVEN rank 0 read twice: a trace_view and a kernel_details export of the same run
    ev = [(1, 0, 100, EXP_KERNEL, Kind.KERNEL)]
    a = make_tl(LANES, ev, fmt="ascend-trace-view", backend="npu")
    b = make_tl(LANES, ev, fmt="ascend-kernel-csv", backend="npu")
    r = analyze([b, a])
    # THEN one export is used and the other named in an info line (not a warning: nothing is wrong)
    assert r.summary.instances == 1 and r.ranks[0].fmt == "ascend-trace-view"
    assert any("1 instance from ascend-trace-view" in i and "ascend-kernel-csv" in i and "not counted" in i
               for i in r.info)
    assert not r.warnings


def test_ranks_and_run_totals_add_up(make_tl):
    tls = [
        make_tl(LANES, [(1, 0, 100 * (k + 1), EXP_KERNEL, Kind.KERNEL), (2, 0, 30, "gemm", Kind.KERNEL)], rank=k)
        for k in range(3)
    ]
    r = analyze(tls)
    assert [x.rank for x in r.ranks] == [0, 1, 2]
    assert r.summary.total_ns == 600 == sum(x.total_ns for x in r.ranks)
    assert r.summary.hidden_ns == 90
    assert r.summary.hidden_fraction == pytest.approx(90 / 600)


def test_work_inside_another_draw_does_not_hide_a_draw(make_tl):
    # GIVEN two overlay spans on two side streams, each with its RNG kernel inside,
    # overlapping each other in time, and a gemm on the main stream under the first only
    tl = make_tl(
        LANES,
        [
            (2, 0, 100, "expo_prof::exponential", Kind.ANNOTATION),
            (2, 5, 90, "void philox_kernel", Kind.KERNEL),
            (3, 50, 100, "expo_prof::exponential", Kind.ANNOTATION),
            (3, 55, 90, "void philox_kernel", Kind.KERNEL),
            (1, 0, 20, "gemm", Kind.KERNEL),
        ],
    )
    # (lane 3 is another device in LANES: put the second draw on cuda:0 too)
    tl.lanes[3] = type(tl.lanes[3])(STREAM, "cuda:0", "stream 30")
    r = analyze([tl])
    # THEN the kernel inside one span does not hide the other draw, nor its own: only the gemm hides
    assert (r.summary.total_ns, r.summary.hidden_ns) == (200, 20)
    assert (r.summary.wall_ns, r.summary.wall_hidden_ns) == (150, 20)

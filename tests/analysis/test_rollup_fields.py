"""Every field of the roll-up (analysis/rollup.py): steps, ranks, runs and the summary.

GIVEN two runs built by hand whose overlaps are known by construction —
run A rank 0: two ProfilerSteps, three draws on stream 20, gemms on stream 7;
run A rank 1: no step markers, two draws that overlap each other;
run B rank 0: one draw, read from two exports of the same run —
WHEN analysed with run labels, THEN each step row, rank row and the summary
hold the nanoseconds worked out below, and the distributions equal numpy's
nearest-rank percentiles (``method="inverted_cdf"``) of the same values.
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from analysis_helpers import EXP_KERNEL, STREAM, THREAD  # type: ignore[import-not-found]

from expo_prof import __version__
from expo_prof.analysis import analyze
from expo_prof.analysis.dists import dist, fraction
from expo_prof.errors import BadInput
from expo_prof.timeline import Kind
from expo_prof.pipeline.options import check_source, compile_op

LANES = [(THREAD, "cpu", "main"), (STREAM, "cuda:0", "stream 7"), (STREAM, "cuda:0", "stream 20")]


def _runs(make_tl):
    a0 = make_tl(LANES, [
        (0, 0, 1000, "ProfilerStep#1", Kind.STEP), (0, 1000, 1000, "ProfilerStep#2", Kind.STEP),
        (2, 100, 100, EXP_KERNEL, Kind.KERNEL), (2, 300, 100, EXP_KERNEL, Kind.KERNEL),
        (2, 1100, 150, EXP_KERNEL, Kind.KERNEL),
        (1, 150, 200, "gemm", Kind.KERNEL),  # hides [150,200) of draw 1 and [300,350) of draw 2
        (1, 1000, 150, "gemm", Kind.KERNEL),  # hides [1100,1150) of draw 3
    ], rank=0)
    a1 = make_tl(LANES, [
        (1, 0, 100, EXP_KERNEL, Kind.KERNEL), (2, 50, 100, EXP_KERNEL, Kind.KERNEL),
        (1, 120, 80, "gemm", Kind.KERNEL),  # hides [120,150) of the draw on stream 20 only
    ], rank=1)
    b0 = make_tl(LANES, [(2, 0, 40, EXP_KERNEL, Kind.KERNEL), (1, 0, 10, "gemm", Kind.KERNEL)], rank=0)
    b0_csv = make_tl(LANES, [(2, 0, 40, EXP_KERNEL, Kind.KERNEL)], rank=0, fmt="ascend-kernel-csv")
    return [a0, a1, b0_csv, b0], ["runA", "runA", "runB", "runB"]


def _nearest_rank(values):
    x = np.array(values)
    return (len(x), statistics.mean(values), int(np.percentile(x, 50, method="inverted_cdf")),
            int(np.percentile(x, 99, method="inverted_cdf")), int(x.max()))


def _check_dist(d, values):
    assert (d.n, d.mean, d.p50, d.p99, d.max) == pytest.approx(_nearest_rank(values))


def test_every_roll_up_field(make_tl):
    tls, runs = _runs(make_tl)
    calls = []
    r = analyze(tls, runs=runs, inputs=["x", "y"], warnings=["given"], skipped=[("p", "why")],
                progress=lambda i, n: calls.append((i, n)))
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert (r.tool_version, r.op, r.inputs, r.skipped) == (__version__, None, ["x", "y"], [["p", "why"]])
    # THEN the second export of run B's rank 0 is named in an info line (nothing is wrong), with the run in front
    assert r.warnings == ["given"]
    assert r.info == ["runB: rank 0: 1 instance from kineto; the ascend-kernel-csv input(s) of the same rank not "
                      "counted (another view of the same draws would count each twice; choose with --source)"]

    # Steps, in (run, rank) order, each sorted by start
    got = [(s.recording, s.rank, s.step, s.start_ns, s.end_ns, s.instances, s.total_ns, s.hidden_ns, s.exposed_ns,
            s.forward_ns, s.wait_ns) for s in r.steps]
    assert got == [
        # run A rank 0: windows [0,1000) and [1000, end of trace 2000); forward = gemm busy of the step
        # (no overlay span or log: the sampler's wait is not measured, so None, never 0)
        ("runA", 0, 1, 0, 1000, 2, 200, 100, 100, 200, None),
        ("runA", 0, 2, 1000, 2000, 1, 150, 50, 100, 150, None),
        # run A rank 1: no steps, one row spanning its draws [0, 150)
        ("runA", 1, None, 0, 150, 2, 200, 30, 170, 80, None),
        # run B rank 0: the kineto export only
        ("runB", 0, None, 0, 40, 1, 40, 10, 30, 10, None),
    ]
    assert [s.hidden_fraction for s in r.steps] == pytest.approx([0.5, 50 / 150, 30 / 200, 10 / 40])
    assert all(s.source == f"hand-built rank {s.rank}" for s in r.steps)

    ranks = {(x.recording, x.rank): x for x in r.ranks}
    assert list(ranks) == [("runA", 0), ("runA", 1), ("runB", 0)]
    a0, a1, b0 = ranks.values()
    # rank rows: sums of their steps; the union view counts overlapping draws once (rank 1: [0,150))
    assert (a0.instances, a0.total_ns, a0.hidden_ns, a0.exposed_ns, a0.forward_ns, a0.wait_ns) == (3, 350, 150, 200, 350, None)
    assert (a0.wall_ns, a0.wall_hidden_ns, a0.step_count) == (350, 150, 2)
    assert a0.hidden_fraction == pytest.approx(150 / 350) and a0.wall_hidden_fraction == pytest.approx(150 / 350)
    assert (a1.instances, a1.total_ns, a1.hidden_ns, a1.wall_ns, a1.wall_hidden_ns, a1.step_count) == (2, 200, 30, 150, 30, 0)
    assert a1.wall_hidden_fraction == pytest.approx(30 / 150) and a1.forward_ns == 80
    assert (b0.fmt, b0.sources, b0.instances, b0.total_ns, b0.hidden_ns) == ("kineto", ["hand-built rank 0"], 1, 40, 10)
    assert (a0.backend, a0.fmt, a0.forward_source) == ("cuda", "kineto", "compute-busy")
    assert a0.names == {EXP_KERNEL: 3} and a1.names == {EXP_KERNEL: 2}
    assert a0.rule and a0.rule == a1.rule
    _check_dist(a0.per_instance.total_ns, [100, 100, 150])
    _check_dist(a0.per_instance.hidden_ns, [50, 50, 50])
    _check_dist(a0.per_instance.exposed_ns, [50, 50, 100])
    _check_dist(a0.per_step.total_ns, [200, 150])
    _check_dist(a0.per_step.forward_ns, [200, 150])
    _check_dist(a1.per_instance.hidden_ns, [0, 30])

    s = r.summary
    assert (s.ranks, s.rank_steps, s.instances, s.total_ns, s.hidden_ns, s.exposed_ns) == (3, 2, 6, 590, 190, 400)
    assert (s.forward_ns, s.wait_ns, s.wall_ns, s.wall_hidden_ns) == (440, None, 540, 190)
    assert s.hidden_fraction == pytest.approx(190 / 590) and s.wall_hidden_fraction == pytest.approx(190 / 540)
    _check_dist(s.per_instance.total_ns, [100, 100, 150, 100, 100, 40])
    _check_dist(s.per_instance.exposed_ns, [50, 50, 100, 100, 70, 30])
    _check_dist(s.per_step.total_ns, [200, 150, 200, 40])
    _check_dist(s.per_step.hidden_ns, [100, 50, 30, 10])
    _check_dist(s.per_step.exposed_ns, [100, 100, 170, 30])
    assert s.per_step.wait_ns is None  # not measured: null, never a distribution of zeros


def test_one_run_has_no_run_labels(make_tl):
    tls, _ = _runs(make_tl)
    r = analyze(tls[2:])  # run B's two exports, no labels
    assert [x.recording for x in r.ranks] == [None] and [s.recording for s in r.steps] == [None]
    assert r.warnings == []
    assert r.info == ["rank 0: 1 instance from kineto; the ascend-kernel-csv input(s) of the same rank not counted "
                      "(another view of the same draws would count each twice; choose with --source)"]


def test_a_format_outside_the_priority_list_is_used_when_alone_and_loses_otherwise(make_tl):
    # GIVEN rank 0 from a format the priority list does not know, alone and next to a Kineto export
    ev = [(2, 0, 40, EXP_KERNEL, Kind.KERNEL)]
    other = make_tl(LANES, ev, rank=0, fmt="hand-made")
    r = analyze([other])
    assert r.ranks[0].fmt == "hand-made" and r.summary.instances == 1 and r.warnings == []
    r = analyze([other, make_tl(LANES, ev, rank=0)])
    assert r.ranks[0].fmt == "kineto" and r.summary.instances == 1
    assert r.warnings == []
    assert r.info == ["rank 0: 1 instance from kineto; the hand-made input(s) of the same rank not counted "
                      "(another view of the same draws would count each twice; choose with --source)"]


def test_run_labels_must_match_and_op_must_compile(make_tl):
    tls, _ = _runs(make_tl)
    with pytest.raises(ValueError, match=r"^runs: 1 labels for 4 timelines$"):
        analyze(tls, runs=["x"])
    # (the options are validated once, by pipeline/options.py, before any analysis runs)
    with pytest.raises(BadInput, match=r"^--op '\(' is not a valid regular expression: "):
        compile_op("(")
    # AND an --op that compiles is used and recorded
    r = analyze(tls[:1], op="gemm")
    assert r.op == "gemm" and r.summary.instances == 2 and r.ranks[0].names == {"gemm": 2}


@pytest.mark.parametrize("n", [1, 2, 3, 7, 99, 100, 101, 250])
def test_dist_is_nearest_rank(n):
    # GIVEN n distinct shuffled values THEN p50/p99 are the nearest-rank order statistics, as numpy defines them
    x = np.random.default_rng(n).permutation(np.arange(10, 10 + 7 * n, 7))
    d = dist(x)
    _check_dist(d, x.tolist())
    assert isinstance(d.p50, int) and isinstance(d.mean, float)
    assert (dist([]).n, dist([]).mean, dist([]).p50, dist([]).p99, dist([]).max) == (0, 0.0, 0, 0, 0)


def test_a_fraction_of_no_time_is_none_not_zero():
    # GIVEN hidden and total exponential time WHEN the hidden fraction is formed
    # THEN it is the plain ratio, and with no exponential time at all there is no fraction (None, not 0 or a crash)
    assert fraction(5, 10) == 0.5 and fraction(0, 7) == 0.0
    assert fraction(0, 0) is None


def test_forward_per_step_is_none_when_never_measured_and_zero_in_a_step_without_one(make_tl):
    # GIVEN draws with no other device work at all: the forward is never measured
    bare = make_tl(LANES, [(0, 0, 2000, "ProfilerStep#1", Kind.STEP), (2, 100, 100, EXP_KERNEL, Kind.KERNEL)], rank=0)
    # WHEN analysed THEN the step's forward is unknown (None), not 0
    r = analyze([bare])
    (s,) = r.steps
    assert (s.step, s.total_ns, s.forward_ns) == (1, 100, None)
    # AND so is the rank's and the run's (not 0 ns)
    assert r.ranks[0].forward_ns is None and r.summary.forward_ns is None
    # GIVEN two steps where only the first runs compute beside its draw
    tl = make_tl(LANES, [
        (0, 0, 1000, "ProfilerStep#1", Kind.STEP), (0, 1000, 1000, "ProfilerStep#2", Kind.STEP),
        (2, 100, 100, EXP_KERNEL, Kind.KERNEL), (1, 150, 200, "gemm", Kind.KERNEL),
        (2, 1100, 100, EXP_KERNEL, Kind.KERNEL),
    ], rank=0)
    # WHEN analysed THEN the forward is measured on this rank: 200 ns in step 1, and 0 ns (not None) in step 2
    assert [(s.step, s.forward_ns) for s in analyze([tl]).steps] == [(1, 200), (2, 0)]
    # AND a hidden fraction of a single 1 ns draw is a fraction (1 ns is time)
    assert fraction(1, 1) == 1.0


def test_source_picks_the_trace_or_the_overlay_log_of_a_rank(make_tl):
    from expo_prof.errors import NothingFound

    # GIVEN rank 0 read twice: from its trace (one 100 ns draw) and from its overlay log (one 200 ns draw)
    trace = make_tl(LANES, [(2, 0, 100, EXP_KERNEL, Kind.KERNEL)], rank=0)
    log = make_tl(LANES, [(2, 0, 200, EXP_KERNEL, Kind.KERNEL)], rank=0, fmt="overlay-log")
    # WHEN analysed with each --source THEN auto and trace count the trace, overlay-log the log, never both
    assert analyze([trace, log]).summary.total_ns == 100
    assert analyze([trace, log], source="trace").summary.total_ns == 100
    assert analyze([trace, log], source="overlay-log").summary.total_ns == 200
    # AND the result records the --source it was made with
    assert [analyze([trace, log], source=x).source for x in ("auto", "trace", "overlay-log")] == [
        "auto", "trace", "overlay-log"]
    # AND a rank known only from its log has nothing for --source trace
    with pytest.raises(NothingFound):
        analyze([log], source="trace")
    # AND an unknown --source is one line naming the choices
    with pytest.raises(BadInput, match=r"^--source 'both': expected one of auto, trace, overlay-log$"):
        check_source("both")


def test_precomputed_analyses_must_match_the_timelines(make_tl):
    from expo_prof.analysis.rollup import analyze_parts
    from expo_prof.analysis.overlap.hidden import analyze_timeline

    # GIVEN two ranks' timelines and their analyses made elsewhere (a parallel read's workers)
    tls = [make_tl(LANES, [(2, 0, 100, EXP_KERNEL, Kind.KERNEL)], rank=r) for r in (0, 1)]
    pre = [analyze_timeline(tl, None) for tl in tls]
    # WHEN rolled up from them THEN the result is the one analysing the timelines gives
    got, _ = analyze_parts(tls, analyses=pre)
    assert got.summary.total_ns == analyze(tls).summary.total_ns == 200
    # AND analyses that do not match the timelines one to one are refused
    with pytest.raises(ValueError, match="analyses: 1 for 2 timelines"):
        analyze_parts(tls, analyses=pre[:1])


def test_a_rank_found_by_two_rules_names_both(make_tl):
    # GIVEN an Ascend rank whose draws are one composite chain and one fused Exponential kernel
    chain = ["DSARandomUniform", "Neg", "Add", "GreaterEqual", "MaskedFill", "Log", "Mul"]
    ev = [(1, 10 * i, 8, n, Kind.KERNEL) for i, n in enumerate(chain)] + [(1, 500, 20, "Exponential", Kind.KERNEL)]
    tl = make_tl([(STREAM, "npu:0", "Stream 2"), (STREAM, "npu:0", "Stream 3")], ev, fmt="ascend-trace-view",
                 backend="npu")
    # WHEN analysed THEN both draws count, and the rank's rule names both rules, sorted, joined by "+"
    r = analyze([tl])
    assert r.summary.instances == 2 and r.ranks[0].rule == "ascend-chain+device-kernel"


def test_a_rank_without_target_instances_does_not_hide_the_ranks_after_it(make_tl):
    # GIVEN rank 0 with compute only (no draw) and rank 1 with one 40 ns draw
    r0 = make_tl(LANES, [(1, 0, 100, "gemm", Kind.KERNEL)], rank=0)
    r1 = make_tl(LANES, [(2, 0, 40, EXP_KERNEL, Kind.KERNEL)], rank=1)
    # WHEN analysed together THEN rank 0 is passed over and rank 1 is still counted
    r = analyze([r0, r1])
    assert [x.rank for x in r.ranks] == [1] and r.summary.total_ns == 40


def test_the_note_on_uncounted_inputs_names_each_format_and_counts_instances(make_tl):
    # GIVEN rank 0 read through three exports: Kineto (two draws), an Ascend kernel CSV and an unknown format
    ev = [(2, 0, 40, EXP_KERNEL, Kind.KERNEL), (2, 100, 40, EXP_KERNEL, Kind.KERNEL)]
    tls = [make_tl(LANES, ev, rank=0, fmt=f) for f in ("hand-made", "kineto", "ascend-kernel-csv")]
    # WHEN analysed THEN only Kineto counts, and one note names the two others, sorted, joined by " and "
    r = analyze(tls)
    assert r.summary.instances == 2
    assert r.info == ["rank 0: 2 instances from kineto; the ascend-kernel-csv and hand-made input(s) of the same "
                      "rank not counted (another view of the same draws would count each twice; choose with --source)"]


def test_a_step_less_row_sorts_before_a_numbered_step_that_starts_at_the_same_time(make_tl):
    # GIVEN rank 0 in two Kineto windows: one with ProfilerStep#1 from 0 holding a draw at 100,
    # one without step markers whose draw starts at 0 (a step-less row, start 0)
    stepped = make_tl(LANES, [(0, 0, 1000, "ProfilerStep#1", Kind.STEP), (2, 100, 50, EXP_KERNEL, Kind.KERNEL)], rank=0)
    bare = make_tl(LANES, [(2, 0, 30, EXP_KERNEL, Kind.KERNEL)], rank=0)
    # WHEN analysed (in either order) THEN rows sort by start, and at a tie the step-less row comes first
    for tls in ([stepped, bare], [bare, stepped]):
        r = analyze(tls)
        assert [(s.step, s.start_ns, s.total_ns) for s in r.steps] == [(None, 0, 30), (1, 0, 50)]


def test_a_draw_counts_in_the_step_its_reader_gave_it_not_the_window_it_lies_in(make_tl):
    # GIVEN an export with a per-event step column (Ascend "Step Id", the overlay log): compute of step 0 at
    # [0, 100), of step 1 at [100, 200), and a draw of step 0 that ran late, at 150 (inside step 1's window)
    tl = make_tl(LANES, [
        (1, 0, 100, "gemm", Kind.KERNEL), (1, 100, 100, "gemm", Kind.KERNEL), (2, 150, 10, EXP_KERNEL, Kind.KERNEL),
    ], rank=0, fmt="ascend-kernel-csv", step=[0, 1, 0])
    # WHEN analysed THEN the draw is counted in step 0, as the column says, and hidden by step 1's compute
    (s,) = analyze([tl]).steps
    assert (s.step, s.instances, s.total_ns, s.hidden_ns) == (0, 1, 10, 10)


def test_vllm_step_annotations_come_from_the_busiest_lane(make_tl):
    # GIVEN vLLM step annotations on two host lanes: one covering the whole run on the main thread,
    # three (one per step) on a worker thread, and a draw in each of the worker's steps
    lanes = LANES + [(THREAD, "cpu", "worker")]
    ann = "execute_context_0(1)_generation_1(1)"
    tl = make_tl(lanes, [
        (0, 0, 3000, ann, Kind.ANNOTATION),
        (3, 0, 1000, ann, Kind.ANNOTATION), (3, 1000, 1000, ann, Kind.ANNOTATION), (3, 2000, 1000, ann, Kind.ANNOTATION),
        (2, 100, 10, EXP_KERNEL, Kind.KERNEL), (2, 1100, 10, EXP_KERNEL, Kind.KERNEL), (2, 2100, 10, EXP_KERNEL, Kind.KERNEL),
    ], rank=0)
    # WHEN analysed THEN the steps are the worker's three (the lane with the most markers), one draw each
    assert [(s.step, s.instances) for s in analyze([tl]).steps] == [(0, 1), (1, 1), (2, 1)]

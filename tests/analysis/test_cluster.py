"""The cluster view: per step the slowest rank bounds the step; skew; stragglers by median + K·MAD.

Pure-function cases on StepResult rows built here, and the view of a real
two-rank torch_npu recording (msinsight's level1 export, ``--op MatMul``) checked
against its own per-rank step rows.
"""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof.analysis.cluster import K, cluster_view, stragglers
from expo_prof.analysis.model import StepResult
from expo_prof.pipeline import Options, run


def _row(rank: int, step: int | None, exposed: int, forward: int | None = None) -> StepResult:
    return StepResult(rank=rank, step=step, source="s", start_ns=0, end_ns=1, instances=1, total_ns=exposed,
                      hidden_ns=0, exposed_ns=exposed, hidden_fraction=0.0, forward_ns=forward, wait_ns=None,
                      critical_ns=0, wait_source=None, recording=None)


def test_slowest_rank_bounds_each_step_and_skew():
    # GIVEN 4 ranks over 2 steps, rank 2 slow in step 1, rank 0 slow in step 2
    rows = [_row(r, 1, e, 100 + r) for r, e in enumerate((10_000, 11_000, 90_000, 10_500))]
    rows += [_row(r, 2, e, None) for r, e in enumerate((50_000, 12_000, 12_000, 12_500))]
    rows.append(_row(3, None, 1_000_000))  # outside any step: not in the view
    # WHEN the view is built
    v = cluster_view(rows, "run-a")
    # THEN per step the slowest rank and its time, the median, the skew
    s1, s2 = v.steps
    assert (s1.slowest_rank, s1.max_exposed_ns, s1.min_exposed_ns, s1.skew_exposed_ns) == (2, 90_000, 10_000, 80_000)
    assert s1.median_exposed_ns == 10_750 and (s1.max_forward_ns, s1.slowest_forward_rank) == (103, 3)
    assert (s2.slowest_rank, s2.max_exposed_ns, s2.max_forward_ns) == (0, 50_000, None)
    # AND the bound is the sum of the maxima, above the sum of the means
    assert v.exposed_slowest_ns == 140_000 and v.exposed_mean_ns == round((121_500 + 86_500) / 4)
    assert v.forward_slowest_ns == 103 and v.skew_max_ns == 80_000 and v.ranks == [0, 1, 2, 3] and v.recording == "run-a"
    # AND the slow rank of each step is flagged, the others not
    assert s1.stragglers == [2] and s2.stragglers == [0]
    assert v.straggler_steps == {"2": 1, "0": 1}


def test_straggler_rule_edges():
    # GIVEN equal ranks with ns-level jitter THEN none is flagged (the floor)
    assert stragglers([100_000, 100_010, 99_990, 100_005]) == []
    # GIVEN two ranks, however different THEN none is flagged (no majority)
    assert stragglers([1, 10**9]) == []
    # GIVEN a spread-out step with one far value x: median 150k, MAD 30k, so the limit is 150k + K·30k
    vals = [100_000, 120_000, 140_000, 160_000, 180_000]
    limit = int(150_000 + K * 30_000)
    assert stragglers(vals + [limit]) == [] and stragglers(vals + [limit + 1]) == [5]


def test_one_rank_has_no_view():
    # GIVEN steps of one rank THEN there is no cluster view
    assert cluster_view([_row(0, 1, 5), _row(0, 2, 7)]) is None


def test_real_two_rank_recording(realtraces):
    # GIVEN a real torch_npu export of two ranks WHEN analysed with --op MatMul
    doc = msgspec.to_builtins(run([realtraces / "msinsight/test/data/pytorch/text/level1"], Options.make(op="MatMul")).document)
    # THEN one cluster view, whose steps agree with the per-rank step rows
    (v,) = doc["cluster"]
    assert v["ranks"] == [0, 1]
    for cs in v["steps"]:
        mine = [s for s in doc["steps"] if s["step"] == cs["step"]]
        exp = {s["rank"]: s["exposed_ns"] for s in mine}
        assert cs["max_exposed_ns"] == max(exp.values()) == exp[cs["slowest_rank"]]
        assert cs["skew_exposed_ns"] == max(exp.values()) - min(exp.values()) > 0
        assert cs["max_forward_ns"] == max(s["forward_ns"] for s in mine)
        assert cs["stragglers"] == []  # two ranks: never flagged


def test_means_of_ranks_per_step_and_over_steps():
    """GIVEN 3 ranks over 2 steps, rank 1 read from two sources in step 1 and rank 2 without forward timing WHEN the
    view is built THEN each step holds the mean over its ranks of hidden, exposed, forward (over the ranks that
    measured it) and wait (null: none measured) — a rank's two rows added first — and per_step_means averages the
    means and the slowest-rank figures over the steps: never a sum over ranks."""
    from expo_prof.analysis.cluster import per_step_means

    def row(rank, step, exposed, hidden, forward, wait=None):
        return StepResult(rank=rank, step=step, source="s", start_ns=0, end_ns=1, instances=1,
                          total_ns=exposed + hidden, hidden_ns=hidden, exposed_ns=exposed, hidden_fraction=None,
                          forward_ns=forward, wait_ns=wait, critical_ns=0, wait_source=None, recording=None)

    rows = [row(0, 1, 100, 10, 1_000), row(1, 1, 40, 5, 600), row(1, 1, 60, 5, 600), row(2, 1, 400, 30, None),
            row(0, 2, 300, 0, 2_000), row(1, 2, 100, 20, 1_000), row(2, 2, 200, 10, None)]
    v = cluster_view(rows)
    s1, s2 = v.steps
    assert (s1.mean_exposed_ns, s1.mean_hidden_ns, s1.mean_forward_ns) == (200.0, 50 / 3, 1_100.0)
    assert (s1.max_exposed_ns, s1.max_forward_ns, s1.mean_wait_ns) == (400, 1_200, None)
    assert (s2.mean_exposed_ns, s2.mean_hidden_ns, s2.mean_forward_ns) == (200.0, 10.0, 1_500.0)
    m = per_step_means(v)
    assert (m["exposed_mean"], m["exposed_max"]) == (200.0, (400 + 300) / 2)
    assert (m["forward_mean"], m["forward_max"], m["wait_mean"]) == ((1_100 + 1_500) / 2, (1_200 + 2_000) / 2, None)
    assert m["hidden_mean"] == (50 / 3 + 10) / 2


def _add_rows(a, b):
    """One rank's two rows of a step (two sources of the same rank): their instances add up."""
    import msgspec

    def opt(x, y):
        return None if x is None and y is None else (x or 0) + (y or 0)

    return msgspec.structs.replace(a, hidden_ns=a.hidden_ns + b.hidden_ns, exposed_ns=a.exposed_ns + b.exposed_ns,
                                   forward_ns=opt(a.forward_ns, b.forward_ns), wait_ns=opt(a.wait_ns, b.wait_ns))


# The cluster view as a loop over steps (the code before issue 41 made it columns): the oracle the columns must
# equal, figure for figure, floats included.
def _reference_view(steps, run=None):
    from collections import defaultdict

    import numpy as np

    from expo_prof.analysis.cluster import RULE
    from expo_prof.analysis.model import ClusterStep, ClusterView

    by_step = defaultdict(dict)
    for s in steps:
        if s.step is None:
            continue
        row = by_step[s.step].get(s.rank)
        by_step[s.step][s.rank] = s if row is None else _add_rows(row, s)
    ranks = sorted({r for rows in by_step.values() for r in rows})
    if len(ranks) < 2:
        return None
    out, flagged, bound, mean_sum, fwd_bound = [], {r: 0 for r in ranks}, 0.0, 0.0, None
    for sid in sorted(by_step):
        rows = by_step[sid]
        rk = sorted(rows)
        exp = [rows[r].exposed_ns for r in rk]
        i_max = int(np.argmax(exp))
        fwds = [(f, r) for r in rk if (f := rows[r].forward_ns) is not None]
        fmax = max(fwds) if fwds else None
        waits = [w for r in rk if (w := rows[r].wait_ns) is not None]
        flags = [rk[i] for i in stragglers(exp)]
        for r in flags:
            flagged[r] += 1
        bound += exp[i_max]
        mean_sum += float(np.mean(exp))
        if fmax is not None:
            fwd_bound = (fwd_bound or 0) + fmax[0]
        out.append(ClusterStep(
            step=sid, ranks=len(rk), slowest_rank=rk[i_max], max_exposed_ns=int(exp[i_max]),
            median_exposed_ns=int(np.median(exp)), min_exposed_ns=int(min(exp)),
            skew_exposed_ns=int(exp[i_max] - min(exp)),
            max_forward_ns=None if fmax is None else int(fmax[0]),
            slowest_forward_rank=None if fmax is None else int(fmax[1]),
            stragglers=flags,
            mean_hidden_ns=float(np.mean([rows[r].hidden_ns for r in rk])),
            mean_exposed_ns=float(np.mean(exp)),
            mean_forward_ns=float(np.mean([f for f, _ in fwds])) if fwds else None,
            mean_wait_ns=float(np.mean(waits)) if waits else None,
        ))
    skews = [s.skew_exposed_ns for s in out]
    return ClusterView(recording=run, ranks=ranks, steps=out, straggler_rule=RULE,
                       exposed_slowest_ns=int(bound), exposed_mean_ns=int(round(mean_sum)),
                       forward_slowest_ns=fwd_bound, skew_p50_ns=int(np.median(skews)), skew_max_ns=int(max(skews)),
                       straggler_steps={str(r): n for r, n in flagged.items() if n})


_opt = st.one_of(st.none(), st.integers(0, 10**9))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.one_of(st.none(), st.integers(0, 6)), st.integers(0, 10**9),
                          st.integers(0, 10**9), _opt, _opt), max_size=80))
def test_the_columns_equal_the_loop_over_steps(rows):
    # GIVEN rows of up to 13 ranks over a few steps (a rank's step twice: two sources; forward and wait measured
    # by some ranks only; rows outside any step)
    steps = [StepResult(rank=r, step=s, source="s", start_ns=0, end_ns=1, instances=1, total_ns=e + h, hidden_ns=h,
                        exposed_ns=e, hidden_fraction=None, forward_ns=f, wait_ns=w, critical_ns=0, wait_source=None,
                        recording=None) for r, s, e, h, f, w in rows]
    # WHEN the view is built on columns THEN it is the loop's, every figure and float the same
    assert msgspec.json.encode(cluster_view(steps, "x")) == msgspec.json.encode(_reference_view(steps, "x"))

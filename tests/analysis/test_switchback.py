"""What the overlay saves, from switchback step columns built with known step times (expo_prof/analysis/saving/switchback.py).

GIVEN step columns as the overlay-log reader produces them, for runs whose step
times (host cadence), washout steps, idle gaps and batch shapes are set by
construction, WHEN analysed THEN the saving, its CI and tests (checked against
scipy on the pair differences worked out by hand), the implied tok/s change,
the contention figures and the verdict are exactly what the construction says.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from expo_prof.analysis.saving.natural import natural_experiment
from expo_prof.analysis.saving.switchback import switchback_saving
from overlay.sampler import switchback_phase

K = 4  # steps per block


def _run(step_ns, *, k: int = K, reqs=None, tokens=None, fwd=None, wait=None, idle_after=(), launched=None,
         fallback=None, phases=None):
    """Step columns of one process: ``step_ns[i]`` is step i's cadence (next t0 − this t0); host_end is 60 %."""
    n = len(step_ns)
    t0 = np.concatenate(([10**9], 10**9 + np.cumsum(np.asarray(step_ns, dtype=np.int64))))[:n]
    for i in idle_after:  # the engine waited for requests after step i: the next step starts 50 ms later
        t0[i + 1:] += 50_000_000
    ph = phases if phases is not None else [switchback_phase(i, k) for i in range(n)]
    on = np.array([p == "on" for p in ph])
    return {
        "step": np.arange(n, dtype=np.int64),
        "phase": np.array(ph, dtype=object),
        "block": np.array([i // k for i in range(n)], dtype=np.int64),
        "reqs": np.asarray(reqs if reqs is not None else [8] * n, dtype=np.int64),
        "tokens": np.asarray(tokens if tokens is not None else [8] * n, dtype=np.int64),
        "t0_ns": t0,
        "host_end_ns": (np.asarray(step_ns, dtype=np.int64) * 6) // 10,
        "fwd_ns": np.asarray(fwd if fwd is not None else [1000] * n, dtype=np.int64),
        "sample_ns": np.full(n, 300, dtype=np.int64),
        "wait_ns": np.asarray(wait if wait is not None else np.where(on, 50, -1), dtype=np.int64),
        "launched": np.asarray(launched if launched is not None else on, dtype=bool),
        "fallback": np.array(fallback if fallback is not None else [None] * n, dtype=object),
    }


def _steps_for_pairs(off_on: list[tuple[int, int]], k: int = K) -> list[int]:
    """Cadences for pairs of blocks: pair p's off steps take off_on[p][0] ns, its on steps off_on[p][1] ns."""
    out = []
    for p, (off, on) in enumerate(off_on):
        for b in (2 * p, 2 * p + 1):
            phase = switchback_phase(b * k, k)
            out += [off if phase == "off" else on] * k
    return out + [off_on[-1][0]]  # one step more: the last block's last step needs a next t0


def test_the_saving_is_the_mean_of_pair_differences_with_the_t_and_sign_flip_tests():
    # GIVEN 6 pairs whose off steps take 10 µs and on steps 10 µs − d_p, d_p known
    d = [2000, 1500, 2500, 1000, 3000, 2200]
    cols = _run(_steps_for_pairs([(10_000, 10_000 - x) for x in d]))
    # WHEN analysed
    s = switchback_saving(cols, rank=0, block_steps=K)
    # THEN the saving is mean(d) with the paired t CI and p of scipy on the differences
    ref = sps.ttest_1samp(d, 0.0)
    half = sps.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / np.sqrt(len(d))
    assert s.saving.mean_ns == pytest.approx(np.mean(d))
    assert s.saving.ci_ns == pytest.approx([np.mean(d) - half, np.mean(d) + half])
    assert s.saving.t_p == pytest.approx(ref.pvalue)
    # AND the exact sign-flip p: every d is positive, so only the all-plus and all-minus flips are as extreme
    assert s.saving.permutation_p == pytest.approx(2 / 2**6)
    # AND 6 pairs; 13 blocks, the 13th holding only the extra last step; the first step of each block is washout
    assert (s.pairs, s.blocks, s.dropped["washout"], s.dropped["no_cadence"]) == (6, 13, 13, 0)
    assert s.baseline_steps == s.arm_steps == 6 * (K - 1)
    # AND the implied output tok/s change is off / on − 1
    assert s.baseline_cadence_ns == pytest.approx(10_000)
    assert s.tokps_change_pct == pytest.approx(100 * (10_000 / (10_000 - np.mean(d)) - 1))
    lo, hi = s.saving.ci_ns
    assert s.tokps_ci_pct == pytest.approx([100 * (10_000 / (10_000 - lo) - 1), 100 * (10_000 / (10_000 - hi) - 1)])
    # AND the verdict in compare's words
    assert s.decision == "enable" and s.statement.startswith("enable: the overlay saves")


def test_a_loss_is_keep_off_and_the_sign_of_every_figure_follows():
    # GIVEN on steps 1.5–2.5 µs slower than off steps
    d = [-2000, -1500, -2500, -1800, -2100]
    s = switchback_saving(_run(_steps_for_pairs([(10_000, 10_000 - x) for x in d])), rank=0, block_steps=K)
    # THEN a negative saving, a negative tok/s change, and "keep off"
    assert s.saving.mean_ns == pytest.approx(np.mean(d)) and s.tokps_change_pct < 0
    assert s.decision == "keep off" and "costs" in s.statement


def test_washout_steps_do_not_count():
    # GIVEN steps equal in both phases except each block's first step, which takes 3× as long in on blocks
    steps = []
    for b in range(8):
        on = switchback_phase(b * K, K) == "on"
        steps += [30_000 if on else 10_000] + [10_000] * (K - 1)
    steps.append(10_000)
    s = switchback_saving(_run(steps), rank=0, block_steps=K)
    # THEN with the washout dropped the phases measured the same: nothing saved, nothing to settle
    assert s.saving.mean_ns == 0 and s.decision == "no significant difference"
    assert s.steps_needed is None


def test_an_idle_gap_is_left_out():
    # GIVEN one pair's on step followed by a 50 ms wait for requests
    d = [2000, 1500, 2500, 1000]
    steps = _steps_for_pairs([(10_000, 10_000 - x) for x in d])
    idle = next(i for i in range(len(steps)) if switchback_phase(i, K) == "on" and i % K == 2)
    s = switchback_saving(_run(steps, idle_after=[idle]), rank=0, block_steps=K)
    # THEN it is counted as idle, not as a 50 ms step, and the saving is the constructed one
    assert s.dropped["idle"] == 1
    assert s.saving.mean_ns == pytest.approx(np.mean(d))


def test_steps_are_compared_only_within_their_batch_shape():
    # GIVEN pairs where on blocks also ran two 8-request prefill steps (64 tokens, 5× slower) that no off block ran,
    # and within each shape the overlay saves exactly 1 µs
    steps, reqs, tokens = [], [], []
    for p in range(5):
        for b in (2 * p, 2 * p + 1):
            on = switchback_phase(b * K, K) == "on"
            for j in range(K):
                prefill = on and j in (1, 2)
                steps.append(50_000 if prefill else (9_000 if on else 10_000))
                tokens.append(64 if prefill else 8)
                reqs.append(8)
    steps.append(10_000)
    tokens.append(8)
    reqs.append(8)
    s = switchback_saving(_run(steps, reqs=reqs, tokens=tokens), rank=0, block_steps=K)
    # THEN the prefill steps find no partner and are left out: the saving is the 1 µs, not an apparent loss
    assert s.saving.mean_ns == pytest.approx(1000) and s.dropped["unmatched_shape"] == 10
    assert [(x.reqs, x.tokens) for x in s.shapes] == [(8, 8)]


def test_contention_and_the_sampler_are_paired_the_same_way():
    # GIVEN the forward 300 ns slower in on blocks (contention) and the overlay saving 1 µs per step overall
    steps = _steps_for_pairs([(10_000, 9_000)] * 4)
    n = len(steps)
    fwd = [1300 if switchback_phase(i, K) == "on" else 1000 for i in range(n)]
    s = switchback_saving(_run(steps, fwd=fwd), rank=0, block_steps=K)
    # THEN forward on − off is exactly 300 ns, the sampler's 0, and the on steps waited 50 ns each
    assert s.forward_change.mean_ns == pytest.approx(300) and s.sampler_change.mean_ns == pytest.approx(0)
    assert s.arm_log_wait_ns == pytest.approx(50)


def test_one_pair_is_inconclusive_and_no_switchback_is_none():
    # GIVEN one pair only THEN inconclusive (no CI, no test), said in the notes
    s = switchback_saving(_run(_steps_for_pairs([(10_000, 9_000)])), rank=0, block_steps=K)
    assert s.decision == "inconclusive" and s.saving.ci_ns is None and s.saving.significant is None
    assert any("at least 2" in n for n in s.notes)
    # AND a log of an "on" run (no blocks) has no switchback result
    cols = _run([10_000] * 9, phases=["on"] * 9)
    cols["block"][:] = -1
    assert switchback_saving(cols, rank=0, block_steps=K) is None


def test_a_small_uncertain_saving_says_how_many_steps_would_settle_it():
    # GIVEN pair differences of mean ~383 ns and sd ~960 ns over 6 pairs (p ~0.37)
    d = [1500, -400, 900, -300, 1300, -700]
    s = switchback_saving(_run(_steps_for_pairs([(10_000, 10_000 - x) for x in d])), rank=0, block_steps=K)
    # THEN no significant difference, with the steps (pairs × 2 blocks × K) a paired t-test would need
    assert s.decision == "no significant difference"
    from expo_prof.stats import runs_needed_paired

    pairs = runs_needed_paired(-np.mean(d), np.std(d, ddof=1))
    assert s.steps_needed == 2 * K * pairs and "steps would settle" in s.statement


def test_the_natural_experiment_matches_steps_by_shape():
    # GIVEN an overlay-on run: launched steps' forward 1200 ns, greedy steps (nothing launched) 1000 ns, in two shapes
    n = 12
    launched = [i % 3 != 0 for i in range(n)]
    tokens = [8 if i < 6 else 16 for i in range(n)]
    fwd = [(1200 if launched[i] else 1000) * (2 if tokens[i] == 16 else 1) for i in range(n)]
    cols = _run([10_000] * n, phases=["on"] * n, launched=launched, tokens=tokens, fwd=fwd,
                fallback=[None if launched[i] else "all_greedy" for i in range(n)])
    cols["block"][:] = -1
    nat = natural_experiment(cols, rank=2)
    # THEN the slowdown is the shape-weighted difference: 200 ns (8 tokens) and 400 ns (16 tokens), equal weights
    assert (nat.without_steps, nat.with_steps) == (4, 8)
    assert nat.slowdown.mean_ns == pytest.approx(300) and nat.rank == 2
    assert "no q launched" in nat.basis


def test_only_the_measured_load_counts():
    # GIVEN 4 pairs of a warm-up (the overlay costs 1 µs there) then 4 pairs of the measured load (it saves 2 µs),
    # and the load's wall-clock window, the log's clock 5 s behind the wall clock
    from expo_prof.analysis.saving.switchback import in_window

    steps = _steps_for_pairs([(10_000, 11_000)] * 4 + [(10_000, 8_000)] * 4)
    cols = _run(steps)
    shift = 5 * 10**9
    start = int(cols["t0_ns"][8 * K]) + shift  # the first step of pair 4
    win = in_window(cols["t0_ns"], shift, [start, start + 10**12])
    # WHEN analysed with and without the window
    s = switchback_saving(cols, rank=0, block_steps=K, window=win, load_window_ns=[start, start + 10**12])
    everything = switchback_saving(cols, rank=0, block_steps=K)
    # THEN only the load's pairs count: the 2 µs saving, the warm-up's steps said as left out
    assert s.saving.mean_ns == pytest.approx(2000) and s.pairs == 4
    assert s.dropped["outside_load"] == 8 * K and s.load_window_ns == [start, start + 10**12]
    assert everything.saving.mean_ns == pytest.approx(500) and everything.load_window_ns is None
    # AND without a clock pair every step counts
    assert in_window(cols["t0_ns"], None, [start, start + 1]).all()


def test_flashinfer_batches_count_as_steps_without_q_and_errors_do_not():
    # GIVEN an overlay-on run on CUDA: launched steps' forward 1200 ns; FlashInfer batches (nothing
    # launched, overlay.dispatch) 1000 ns; one step whose launch failed ("error", 5000 ns: not a batch
    # that needed no q)
    n = 9
    launched = [i % 3 != 0 for i in range(n)]
    fallback = [None if launched[i] else "flashinfer" for i in range(n)]
    fallback[0] = "error"
    fwd = [1200 if launched[i] else 1000 for i in range(n)]
    fwd[0] = 5000
    cols = _run([10_000] * n, phases=["on"] * n, launched=launched, tokens=[8] * n, fwd=fwd, fallback=fallback)
    cols["block"][:] = -1
    nat = natural_experiment(cols, rank=0)
    # THEN the two FlashInfer steps are the "without" side, the failed launch is not
    assert (nat.without_steps, nat.with_steps) == (2, 6)
    assert nat.slowdown.mean_ns == pytest.approx(200) and "FlashInfer" in nat.basis


def test_a_saving_bound_past_the_off_step_is_no_upper_bound_with_its_reason_never_infinity():
    # GIVEN 5 pairs whose savings scatter so widely that the upper 95 % bound passes the 10 µs off step
    # (an on step of zero time: no tok/s bound exists there)
    d = [9000, 2000, 9500, 500, 9800]
    s = switchback_saving(_run(_steps_for_pairs([(10_000, 10_000 - x) for x in d])), rank=0, block_steps=K)
    lo, hi = s.saving.ci_ns
    assert lo < 10_000 <= hi
    # THEN the tok/s CI keeps its finite lower bound and has no upper one, and says why
    assert s.tokps_ci_pct[0] == pytest.approx(100 * (10_000 / (10_000 - lo) - 1)) and s.tokps_ci_pct[1] is None
    assert s.tokps_ci_note.startswith("no upper bound: ") and "zero time" in s.tokps_ci_note
    # AND no statement, table or saving line prints an infinity
    from rich.console import Console

    from expo_prof.pipeline.result import saving_line
    from expo_prof.terminal.saving import saving_table

    con = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    con.print(saving_table(s))
    texts = [s.statement, con.export_text(), saving_line([s])]
    for text in texts:
        assert "inf" not in text and "no upper bound" in text, text


def test_an_interval_across_zero_reads_no_difference_shown_with_its_width_in_every_statement():
    # GIVEN pairs whose differences straddle zero (the overlay saves 300 ns on average, CI across zero), the
    # forward 40 ns faster on average in on blocks, also across zero
    d = [2000, -1500, 1800, -1200, 400]
    steps = _steps_for_pairs([(10_000, 10_000 - x) for x in d])
    n = len(steps)
    e = [-300, 250, -200, 300, -250, 0]  # pair p's on-block forward, less its off block's (mean -40 ns)
    fwd = [1000 + (e[i // (2 * K)] if switchback_phase(i, K) == "on" else 0) for i in range(n)]
    s = switchback_saving(_run(steps, fwd=fwd), rank=0, block_steps=K)
    assert s.saving.ci_ns[0] < 0 < s.saving.ci_ns[1] and s.decision == "no significant difference"
    assert s.forward_change.ci_ns[0] < 0 < s.forward_change.ci_ns[1]
    from expo_prof.pipeline.result import saving_line
    from expo_prof.words import fmt_ns

    width = fmt_ns(s.saving.ci_ns[1] - s.saving.ci_ns[0])
    line = saving_line([s])
    # THEN the saving reads "no difference shown", with the CI's width, never "saves X (CI -a to b)"
    # (the statement and the line say it in the one clause of analysis/saving/words.py)
    for text in (s.statement, line):
        assert f"no difference shown (mean {fmt_ns(abs(s.saving.mean_ns))}/step saved; 95% CI " in text, text
        assert f"width {width})" in text and "saves" not in text
    # AND the forward beside the lane likewise: neither "slower" nor "faster" stated as found
    assert "the forward beside the lane: no difference shown (mean" in s.statement


def test_the_natural_experiment_says_faster_only_when_its_ci_is_below_zero():
    # GIVEN an overlay-on run whose launched steps' forward is 275 ns faster on average, with a spread that
    # puts zero inside the CI (the "406.0 µs faster (95% CI -1.24 ms to 423.3 µs)")
    without = [1000, 3000, 200, 1800]
    with_ = [1000, 2500, 300, 1400, 900, 1900, 100, 1700]
    n = len(without) + len(with_)
    launched = [False] * len(without) + [True] * len(with_)
    cols = _run([10_000] * n, phases=["on"] * n, launched=launched, fwd=without + with_,
                fallback=[None if x else "all_greedy" for x in launched])
    cols["block"][:] = -1
    nat = natural_experiment(cols, rank=0)
    lo, hi = nat.slowdown.ci_ns
    assert nat.slowdown.mean_ns == pytest.approx(np.mean(with_) - np.mean(without)) and lo < 0 < hi
    # THEN "no difference shown", with the signed CI and its width; not "faster"
    assert "beside the draw no difference shown (mean 275 ns faster; 95% CI " in nat.statement
    assert "faster (95% CI" not in nat.statement
    # AND with the same spread 10× smaller the CI lies below zero: "faster", the CI in the same words
    cols["fwd_ns"] = np.asarray([1000 + (x - 1000) // 10 for x in without]
                                + [700 + (x - 1000) // 10 for x in with_], dtype=np.int64)
    nat = natural_experiment(cols, rank=0)
    assert nat.slowdown.ci_ns[1] < 0 and "ns faster (95% CI " in nat.statement and nat.statement.endswith("faster)")


def test_a_switchback_run_states_the_forward_once_the_natural_experiment_set_aside():
    # GIVEN the committed switchback sample (a real vLLM CPU run), read as every command reads it
    from pathlib import Path

    from expo_prof.analysis.saving.recording import savings_of
    from expo_prof.readers import load

    run = Path(__file__).resolve().parents[2] / "traces" / "samples" / "tiny-cpu-switchback"
    savings, natural = savings_of(load([run / "overlay"]).timelines)
    # THEN the switchback's paired forward change is the one forward estimate of that rank
    assert [s.rank for s in savings] == [0] and savings[0].forward_change is not None
    assert natural == []

"""What the overlay saves per step: switchback blocks of one run compared, and the steps that launched nothing.

A switchback run (``EXPO_PROF_ASYNC_EXPONENTIAL=switchback``) alternates
blocks of K steps between the overlay (phase ``on``) and vLLM's own sampling
path (``off``) in one server process, under the same load, KV cache and
thermal state. Each step line of the overlay's event log carries its phase,
block, batch shape (requests, forward tokens) and host timing. This module
turns those columns into a verdict, knowing nothing of the file they came from.

The method (docs/ab.md, "Switchback"):

* **Per-step cost** = the step's cadence on the host: ``t0`` of the next step
  minus ``t0`` of this one — forward, sampler, wait *and* everything vLLM does
  between steps, which is what output tok/s pays. A cadence is only taken when
  the next line is the very next step of the process, and it is left out as
  an *idle gap* when the host time after the step's own work
  (``cadence − host_end``) exceeds 10 × its run median + 1 ms: the engine
  waited for requests.
* **Washout**: the first step of every block is dropped (the switch itself:
  the first launch, cold caches).
* **Pairs**: blocks ``2p`` and ``2p + 1`` form pair ``p`` (one off, one on:
  the overlay runs them off, on, on, off, off, on …). Within a pair, steps are
  compared only within the same batch shape (requests, tokens), so a batch
  that grows or shrinks does not pass for an effect; the pair's difference
  is the weighted mean of its shapes' differences (weight
  ``n_off·n_on / (n_off + n_on)``, the inverse variance of a difference of
  two means).
* **Statistics**: the pair differences go through the paired t-test and the
  exact sign-flip permutation test (Monte Carlo past 16 pairs) of
  :mod:`expo_prof.stats`, judged as ``compare`` judges runs; the verdict uses
  its words (enable / keep off / no significant difference / inconclusive).
* **What it implies**: output tok/s scales with 1 / step time for the same
  batch, so the tok/s change is ``off / on − 1`` with the CI of the saving
  carried through (the off mean taken as exact, as ``compare`` takes
  mean(A)).
* **Contention**: forward time in on blocks minus off blocks, paired the same way.
* **The step broken down**: each arm's step as forward + sampler (its wait included) + the rest, weighted as
  the step is (:class:`StepParts`), so the parts' differences are the paired changes above.
* **Words**: every difference is said in words that follow its CI (:func:`diff_words`: "no difference
  shown", with the width, when it holds zero), every left-out step with what its reason means
  (:data:`DROPPED_WORDS`), a tok/s bound that does not exist as such, never as an infinity.

Three arms (header ``arms`` = off, on, native; docs/ab.md): blocks ``3g`` …
``3g + 2`` form group ``g``, one block per arm, and each of three comparisons
is made exactly as a pair is above, within each group: ``on`` against ``off``
(does the early side-stream draw pay against the inline draw?), ``native``
against ``off`` (does the engine's own async draw pay?) and ``on`` against
``native`` (does the early launch beat the engine's own?). Each is one
:class:`Saving`, its ``compared`` naming the baseline and the arm.

The natural experiment (:func:`natural_experiment`) needs no switchback: in
any overlay run, steps whose batch launched no ``q`` (all greedy, all seeded)
ran their forward without the lane; compared with launched steps of the same
batch shape they show the forward's slowdown beside the draw. A switchback
rank measures that by its pairs already, so :func:`expo_prof.analysis.saving.recording.savings_of` gives it none
(:mod:`expo_prof.analysis.saving.natural`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from expo_prof.analysis.model import Interval, Saving, SequentialSpec, Shape, StepParts
from expo_prof import stats
from expo_prof.analysis.steps.facts import cadence, ints
from expo_prof.analysis.saving.sequential import sequence
from expo_prof.analysis.saving.words import left_out_words, sequential_statement, statement, tokps_of
from expo_prof.words import ENABLE, INCONCLUSIVE, KEEP_OFF, NO_DIFFERENCE, fmt_ns, plural

CONFIDENCE = 0.95
ALPHA = 0.05
#: The phase words of the event log (overlay.contract.PHASE_ON / PHASE_OFF / PHASE_NATIVE).
ON, OFF, NATIVE = "on", "off", "native"
TWO_ARMS = (OFF, ON)
THREE_ARMS = (OFF, ON, NATIVE)
#: The comparisons of each switchback (baseline, arm), and what each tells, in the verdict's words.
COMPARISONS: dict[tuple[str, ...], list[tuple[str, str]]] = {
    TWO_ARMS: [(OFF, ON)],
    THREE_ARMS: [(OFF, ON), (OFF, NATIVE), (NATIVE, ON)],
}
SUBJECTS = {
    (TWO_ARMS, (OFF, ON)): "the overlay",
    (THREE_ARMS, (OFF, ON)): "the overlay's early side-stream draw (on), against the draw inline after the forward "
                             "(off),",
    (THREE_ARMS, (OFF, NATIVE)): "the engine's own draw as shipped (native), against the draw inline after the "
                                 "forward (off),",
    (THREE_ARMS, (NATIVE, ON)): "the overlay's early launch (on), against the engine's own draw (native),",
}


def _interval(off: np.ndarray, on: np.ndarray, sign: int) -> Interval | None:
    """``sign`` · (on − off) over pairs, with its CI and tests (None without pairs)."""
    if len(off) == 0:
        return None
    d = sign * (on - off)
    if len(d) < 2:
        return Interval(mean_ns=float(d.mean()), ci_ns=None, t_p=None, permutation_p=None, significant=None)
    a, b = np.zeros(len(d)), d
    t = stats.paired_t(a, b, CONFIDENCE)
    perm = stats.sign_flip_test(a, b)
    sig, _ = stats.significant(t, perm, ALPHA)
    return Interval(mean_ns=float(d.mean()), ci_ns=[t.ci_low, t.ci_high], t_p=t.p, permutation_p=perm.p,
                    significant=sig)


def _pair_means(pair_of: np.ndarray, phase: np.ndarray, shape: np.ndarray, value: np.ndarray,
                keep: np.ndarray, compared: tuple[str, str] = (OFF, ON)) -> tuple[list[tuple[int, float, float]], dict,
                                                                                   np.ndarray]:
    """Per usable pair ``(p, baseline mean, arm mean)``, weighted over the shapes both blocks ran; the shape
    table; and the mask of kept steps whose shape found a partner. ``pair_of``: each step's pair (or group)."""
    pairs: list[tuple[int, float, float]] = []
    shapes: dict[tuple[int, int], dict] = {}
    matched = np.zeros(len(pair_of), dtype=bool)
    base, arm = compared
    for p in np.unique(pair_of[keep]):
        in_pair = keep & (pair_of == p)
        w_sum = off_sum = on_sum = 0.0
        for sh in np.unique(shape[in_pair]):
            sel = in_pair & (shape == sh)
            off_sel, on_sel = sel & (phase == base), sel & (phase == arm)
            n_off, n_on = int(off_sel.sum()), int(on_sel.sum())
            if not n_off or not n_on:
                continue
            matched |= off_sel | on_sel
            w = n_off * n_on / (n_off + n_on)
            m_off, m_on = float(value[off_sel].mean()), float(value[on_sel].mean())
            w_sum += w
            off_sum += w * m_off
            on_sum += w * m_on
            key = (int(sh >> 32), int(sh & 0xFFFFFFFF))
            acc = shapes.setdefault(key, {"pairs": 0, "n_off": 0, "n_on": 0, "off": 0.0, "on": 0.0})
            acc["pairs"] += 1
            acc["n_off"] += n_off
            acc["n_on"] += n_on
            acc["off"] += float(value[off_sel].sum())
            acc["on"] += float(value[on_sel].sum())
        if w_sum > 0:
            pairs.append((int(p), off_sum / w_sum, on_sum / w_sum))
    return pairs, shapes, matched


def shape_key(reqs: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    return (ints(reqs) << 32) | (ints(tokens) & 0xFFFFFFFF)


def in_window(t0_ns: np.ndarray, wall_minus_mono_ns: int | None, window_ns: list[int] | None) -> np.ndarray:
    """Steps launched inside the wall-clock ``window_ns`` (all of them without a window or a clock pair)."""
    t0 = ints(t0_ns)
    if window_ns is None or wall_minus_mono_ns is None:
        return np.ones(len(t0), dtype=bool)
    wall = t0 + int(wall_minus_mono_ns)
    return (wall >= int(window_ns[0])) & (wall <= int(window_ns[1]))


def switchback_savings(cols: Mapping[str, np.ndarray], *, rank: int, block_steps: int,
                       arms: tuple[str, ...] = TWO_ARMS, window: np.ndarray | None = None,
                       load_window_ns: list[int] | None = None,
                       sequential: SequentialSpec | None = None) -> list[Saving]:
    """Every comparison of one rank's switchback run (:data:`COMPARISONS` of its ``arms``), in that order."""
    out = []
    for compared in COMPARISONS[arms]:
        s = switchback_saving(cols, rank=rank, block_steps=block_steps, arms=arms, compared=compared, window=window,
                              load_window_ns=load_window_ns, sequential=sequential)
        if s is not None:
            out.append(s)
    return out


def switchback_saving(cols: Mapping[str, np.ndarray], *, rank: int, block_steps: int,
                      window: np.ndarray | None = None, load_window_ns: list[int] | None = None,
                      arms: tuple[str, ...] = TWO_ARMS, compared: tuple[str, str] = (OFF, ON),
                      sequential: SequentialSpec | None = None) -> Saving | None:
    """The saving of one rank's switchback run from its event-log step columns; None: no switchback step.

    ``cols`` (one entry per step line, in file order): ``step``, ``phase``
    ("on"/"off"/"native"/None), ``block`` (-1: none), ``reqs``, ``tokens``, ``t0_ns``,
    ``host_end_ns`` (-1: unknown), ``fwd_ns``, ``sample_ns``, ``wait_ns``
    (-1: not measured), ``launched``. ``window``: the steps of the measured
    load (:func:`in_window`; ``load_window_ns`` says which window, for the
    record); the others are left out as ``outside_load``. ``arms``: the run's
    arms (blocks ``len(arms)·g`` … form group ``g``); ``compared``: (baseline,
    arm), whose steps alone are counted. ``sequential``: the run decided as it went (a confidence sequence
    instead of the fixed-horizon CI: :mod:`expo_prof.analysis.saving.sequential`).
    """
    block = ints(cols["block"])
    phase = np.asarray(cols["phase"], dtype=object)
    sb = (block >= 0) & np.isin(phase, compared)
    if not sb.any():
        return None
    cad, keep, dropped, blocks = _kept(cols, sb, block, phase, window, arms, compared)
    pair_of = np.where(block >= 0, block // len(arms), -1)
    reqs = ints(cols["reqs"])
    shape = shape_key(reqs, cols["tokens"])
    pairs, shapes, matched = _pair_means(pair_of, phase, shape, cad.astype(float), keep, compared)
    dropped["unmatched_shape"] = int((keep & ~matched).sum())
    used = keep & matched
    off = np.array([m for _, m, _ in pairs])
    on = np.array([m for _, _, m in pairs])
    saving = _interval(off, on, -1)
    notes: list[str] = []

    def means(column: str) -> tuple[np.ndarray, np.ndarray]:
        """Per usable pair, the baseline's and the arm's weighted mean of ``column`` (its measured steps)."""
        v = ints(cols[column]).astype(float)
        pr, _, _ = _pair_means(pair_of, phase, shape, v, used & (v >= 0), compared)
        return np.array([m for _, m, _ in pr]), np.array([m for _, _, m in pr])

    fwd_off, fwd_on = means("fwd_ns")
    smp_off, smp_on = means("sample_ns")
    forward_change = _interval(fwd_off, fwd_on, +1)
    sampler_change = _interval(smp_off, smp_on, +1)
    wait = ints(cols["wait_ns"])

    def mean_wait(arm: str) -> float | None:
        sel = used & (phase == arm) & (wait >= 0)
        return float(wait[sel].mean()) if sel.any() else None

    wait_on = mean_wait(compared[1])

    off_mean = float(off.mean()) if len(off) else None
    on_mean = float(on.mean()) if len(on) else None
    off_parts = _parts(off_mean, fwd_off, smp_off, mean_wait(compared[0]))
    on_parts = _parts(on_mean, fwd_on, smp_on, wait_on)
    tok, tok_ci, tok_note = _tokps(saving, off_mean, compared)
    seq = None
    subject = SUBJECTS.get((arms, compared), f"{compared[1]} against {compared[0]}")
    if sequential is not None and len(pairs):
        margin, share = sequential.margin_for(off_mean)
        seq = sequence(off - on, margin, alpha=sequential.alpha, optimal_pairs=sequential.optimal_pairs,
                       margin_share=share)
        decision = seq.decision
        needed = None if seq.pairs_needed is None else len(arms) * block_steps * seq.pairs_needed
    else:
        decision, needed = _fixed_decision(saving, on - off, len(arms) * block_steps)
    if len(pairs) < 2:
        notes.append(f"{plural(len(pairs), 'block pair')} compared: at least 2 are needed for a confidence interval "
                     "(run longer, or with a smaller EXPO_PROF_SWITCHBACK_BLOCK)")
    if left_out_words(dropped):
        notes.append("left out: " + "; ".join(left_out_words(dropped)))
    sv = Saving(
        rank=rank, block_steps=block_steps, arms=list(arms), compared=list(compared), blocks=blocks,
        pairs=len(pairs), load_window_ns=load_window_ns,
        baseline_steps=int((used & (phase == compared[0])).sum()), arm_steps=int((used & (phase == compared[1])).sum()),
        dropped=dropped, baseline_cadence_ns=off_mean, arm_cadence_ns=on_mean, saving=saving,
        tokps_change_pct=tok, tokps_ci_pct=tok_ci, tokps_ci_note=tok_note, decision=decision, steps_needed=needed,
        forward_change=forward_change, sampler_change=sampler_change, arm_log_wait_ns=wait_on,
        baseline_parts=off_parts, arm_parts=on_parts,
        shapes=[Shape(reqs=r, tokens=t, pairs=a["pairs"], baseline_steps=a["n_off"], arm_steps=a["n_on"],
                      baseline_cadence_ns=a["off"] / a["n_off"], arm_cadence_ns=a["on"] / a["n_on"])
                for (r, t), a in sorted(shapes.items())],
        statement="", notes=notes, pair_savings_ns=[float(x) for x in off - on], sequence=seq,
    )
    # The one verdict sentence (analysis/saving/words.py), from the figures just set.
    sv.statement = (sequential_statement if seq is not None else statement)(sv, subject, int(used.sum()))
    return sv


def _kept(cols: Mapping[str, np.ndarray], sb: np.ndarray, block: np.ndarray, phase: np.ndarray,
          window: np.ndarray | None, arms: tuple[str, ...], compared: tuple[str, str]
          ) -> tuple[np.ndarray, np.ndarray, dict[str, int], int]:
    """Which switchback steps ``sb`` are compared: (their cadence, the kept mask, the left-out counts by reason,
    the blocks seen). Left out: outside the load ``window``, each block's first step (washout), a step without a
    cadence or in an idle gap, a request-less step, and a step whose pair has no kept step of the other arm."""
    if window is None:
        window = np.ones(len(block), dtype=bool)
    cad, idle = cadence(cols["step"], cols["t0_ns"], cols["host_end_ns"])
    first_of_block = np.zeros(len(block), dtype=bool)
    seen: set[int] = set()
    for i in np.flatnonzero(sb):
        if int(block[i]) not in seen:
            seen.add(int(block[i]))
            first_of_block[i] = True
    reqs = ints(cols["reqs"])
    dropped = {
        "outside_load": int((sb & ~window).sum()),
        "washout": int((sb & window & first_of_block).sum()),
        "no_cadence": int((sb & window & ~first_of_block & (cad < 0)).sum()),
        "idle": int((sb & window & ~first_of_block & idle).sum()),
    }
    keep = sb & window & ~first_of_block & (cad >= 0) & ~idle & (reqs > 0)
    pair_of = np.where(block >= 0, block // len(arms), -1)
    # A step is unpaired when its pair (group) has no kept step of the other compared arm.
    partners = {(int(u), str(ph)) for u, ph in zip(pair_of[keep], phase[keep], strict=True)}
    other = {compared[0]: compared[1], compared[1]: compared[0]}
    lonely = keep & np.array([(int(u), other.get(ph)) not in partners for u, ph in zip(pair_of, phase, strict=True)],
                             dtype=bool)
    dropped["unpaired"] = int(lonely.sum())
    return cad, keep & ~lonely, dropped, len(seen)


def _tokps(saving: Interval | None, base: float | None, compared: tuple[str, str]
           ) -> tuple[float | None, list[float | None] | None, str | None]:
    """The output tok/s change a saving implies against the baseline's cadence ``base`` (%), its CI, and the note
    where a CI bound does not exist."""
    tok = tok_ci = tok_note = None
    if saving is not None and base:
        tok = tokps_of(saving.mean_ns, base)
        if saving.ci_ns is not None:
            # A saving bound at or past the baseline's cadence would be an arm step of zero (or negative) time: no
            # tok/s bound exists there (tokps_of: None), and the note says so rather than printing an infinity.
            tok_ci = [tokps_of(c, base) for c in saving.ci_ns]
            if None in tok_ci:
                tok_note = (f"no upper bound: the saving's upper 95% bound ({fmt_ns(max(saving.ci_ns))}) reaches the "
                            f"{compared[0]} step itself ({fmt_ns(base)}), a {compared[1]} step of zero time")
    return tok, tok_ci, tok_note


def _fixed_decision(saving: Interval | None, diffs: np.ndarray, steps_per_pair: int) -> tuple[str, int | None]:
    """The fixed-horizon decision of the pair differences (arm − baseline) and the steps that would settle it."""
    if saving is None or saving.significant is None:
        return INCONCLUSIVE, None
    if saving.significant:
        return (ENABLE if saving.mean_ns > 0 else KEEP_OFF), None
    n_pairs = stats.runs_needed_paired(float(diffs.mean()), float(np.std(diffs, ddof=1)), ALPHA)
    return NO_DIFFERENCE, None if n_pairs is None else steps_per_pair * n_pairs


def _parts(step: float | None, fwd: np.ndarray, smp: np.ndarray, wait: float | None) -> StepParts | None:
    """One arm's step broken down (:class:`StepParts`) from its per-pair means (the step's, the forward's, the
    sampler's) and its mean wait; None without a step mean."""
    if step is None:
        return None
    f = float(fwd.mean()) if len(fwd) else None
    sm = float(smp.mean()) if len(smp) else None
    w = wait
    rest = step - f - sm if f is not None and sm is not None else None
    return StepParts(cadence_ns=step, forward_ns=f, sampler_ns=sm, log_wait_ns=w, rest_ns=rest)

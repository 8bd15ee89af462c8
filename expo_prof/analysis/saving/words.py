"""The saving in words: the one verdict clause, the one CI text, the one tok/s precision, what each left-out
step means, differences in words that follow their CI, what would settle a saving.

Every output takes its words from here: the estimator's ``statement`` (:mod:`.switchback`), the saving line
(``pipeline/result.py``), the terminal's switchback table (``terminal/saving.py``) and the report page (whose
payload carries :func:`page_words`, so its JavaScript formats no figure of a saving). A figure therefore prints the
same digits everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from expo_prof.analysis.model import Interval, Saving, Sequence
from expo_prof.analysis.saving.sequential import MIN_PAIRS, decide
from expo_prof.words import INCONCLUSIVE, NO_DIFFERENCE, NO_EFFECT, UNDECIDED, fmt_ns, plural

__all__ = ["DROPPED_WORDS", "TOKPS_DIGITS", "across_zero", "ci_column", "ci_text", "diff_words", "left_out_words",
           "margin_words", "page_words", "saving_clause", "saving_line_part", "sequence_words", "settle_words",
           "statement", "sequential_statement", "tokps_ci_text", "tokps_of", "tokps_text"]

#: Decimals of every output tok/s change (%): the statement, the saving line, the tables, the report page.
TOKPS_DIGITS = 1


def tokps_text(pct: float) -> str:
    """An output tok/s change as every output prints it: ``+5.3%``."""
    return f"{pct:+.{TOKPS_DIGITS}f}%"


def ci_text(iv: Interval, sign: int = 1) -> str:
    """``95% CI 1.2 ms to 3.4 ms`` of ``sign`` · the interval, as magnitudes in the direction the words say
    (saves / costs); empty without a CI. The CI of every verdict clause."""
    if iv.ci_ns is None:
        return ""
    lo, hi = sorted(sign * c for c in iv.ci_ns)
    return f"95% CI {fmt_ns(lo)} to {fmt_ns(hi)}"


def ci_column(iv: Interval) -> str:
    """The interval itself, signed, and "no difference shown" with its width where it holds zero: the CI column
    of the switchback table and of the report page's saving card."""
    if iv.ci_ns is None:
        return "no CI: fewer than 2 block pairs"
    lo, hi = iv.ci_ns
    text = f"95% CI {fmt_ns(lo, signed=True)} to {fmt_ns(hi, signed=True)}"
    return f"{text}: no difference shown (width {fmt_ns(hi - lo)})" if across_zero(iv) else text


#: Why a step line was left out, in one short clause each (the keys of ``Saving.dropped``; docs/ab.md).
DROPPED_WORDS = {
    "outside_load": "outside the measured load: the warm-up, the idle end",
    "washout": "washout: each block's first step, which pays the switch",
    "no_cadence": "no cadence: no next step to time them by",
    "idle": "idle gaps: the engine waited for requests",
    "unpaired": "unpaired: their pair's other block kept no step",
    "unmatched_shape": "unmatched shape: the other block never ran it",
}

#: What a switchback's interval holds under: the size is this load's on this machine; launches under other loads
#: (ab --switchback --repeat) measure how much it moves, and only the decision's sign is claimed to carry.
SIGN_ONLY = "the size holds for this load; across runs only its sign carries"

#: What each switchback arm's steps run (two arms: ``off`` is the engine's sampling as shipped; three arms: ``off``
#: is the exponential drawn inline after the forward, ``native`` the engine as shipped). The one wording of the
#: terminal's saving table, the timeline's phase row and the export's phase track.
ARM_WORDS = {"on": "overlay", "native": "engine as shipped", "off": "inline draw"}


def arm_words_of(arm: str, n_arms: int) -> str:
    """What ``arm``'s steps run in a switchback of ``n_arms`` arms (:data:`ARM_WORDS`)."""
    return ARM_WORDS["native"] if arm == "off" and n_arms == 2 else ARM_WORDS.get(arm, arm)


def left_out_words(dropped: Mapping[str, int]) -> list[str]:
    """``["200 outside the measured load (…)", …]``: each non-zero reason of ``dropped``, with what it means."""
    return [f"{n} {DROPPED_WORDS.get(k, k.replace('_', ' '))}" for k, n in dropped.items() if n]


def across_zero(iv: Interval | None) -> bool:
    """Whether the interval's 95 % CI holds zero: no difference shown (False without a CI)."""
    return iv is not None and iv.ci_ns is not None and iv.ci_ns[0] <= 0.0 <= iv.ci_ns[1]


def diff_words(iv: Interval, more: str, less: str, per: str = "") -> str:
    """A difference in words that follow its CI: ``3.1 ms slower (95% CI 2.0 ms to 4.2 ms slower)`` when the
    CI lies on one side of zero; ``no difference shown (mean 406.0 µs less, 95% CI -1.24 ms to +423.3 µs,
    width 1.66 ms)`` when it holds zero (``more`` / ``less``: the words of a positive / negative difference;
    ``per``: the unit the mean is counted in, e.g. ``/step``, written after it)."""
    word = more if iv.mean_ns >= 0 else less
    if iv.ci_ns is None:
        return f"{fmt_ns(abs(iv.mean_ns))}{per} {word} (no CI: fewer than 2 pairs)"
    lo, hi = iv.ci_ns
    if lo <= 0.0 <= hi:
        return (f"no difference shown (mean {fmt_ns(abs(iv.mean_ns))}{per} {word}; 95% CI {fmt_ns(lo, signed=True)} "
                f"to {fmt_ns(hi, signed=True)}, width {fmt_ns(hi - lo)})")
    a, b = sorted((abs(lo), abs(hi)))
    return f"{fmt_ns(abs(iv.mean_ns))}{per} {word} (95% CI {fmt_ns(a)} to {fmt_ns(b)} {word})"


def tokps_of(saving_ns: float, baseline_step_ns: float | None) -> float | None:
    """The output tok/s change (%) a saving per step implies against the baseline's step (null where it has none,
    or the arm's step would be zero or less)."""
    if not baseline_step_ns or saving_ns >= baseline_step_ns:
        return None
    return 100.0 * (baseline_step_ns / (baseline_step_ns - saving_ns) - 1.0)


def sequence_words(seq: Sequence, baseline_step_ns: float | None, per: str = "/step") -> str:
    """A sequential switchback's saving in one clause, said the same everywhere: ``costs 266.2 µs/step (95%
    confidence sequence 101.6 µs to 430.9 µs), output tok/s -10.5%``."""
    sign = 1 if seq.mean_ns >= 0 else -1
    cs = ""
    if seq.lo_ns is not None and seq.hi_ns is not None:
        lo, hi = sorted((sign * seq.lo_ns, sign * seq.hi_ns))
        cs = f" (95% confidence sequence {fmt_ns(lo)} to {fmt_ns(hi)})"
    words = f"{'saves' if sign > 0 else 'costs'} {fmt_ns(sign * seq.mean_ns)}{per}{cs}"
    tok = tokps_of(seq.mean_ns, baseline_step_ns)
    return words if tok is None else f"{words}, output tok/s {tokps_text(tok)}"


def margin_words(margin_ns: float, baseline_step_ns: float | None) -> str:
    """The margin of "no effect" in both units: ``±22.7 µs/step (±1.0% output tok/s)``."""
    tok = tokps_of(margin_ns, baseline_step_ns)
    return f"±{fmt_ns(margin_ns)}/step" + (f" (±{tok:.{TOKPS_DIGITS}f}% output tok/s)" if tok is not None else "")


def settle_words(sv: Saving) -> tuple[str, str]:
    """The "to settle" row of every switchback block: (figure, words) — how many steps would settle the
    saving, or why none are needed / none can be said. A run that decided as it went: where its confidence
    sequence stands."""
    sq = sv.sequence
    if sq is not None:
        if sq.lo_ns is None:
            return "–", f"a confidence sequence needs {MIN_PAIRS} block pairs ({sq.pairs} here)"
        if sq.settled_at is not None:
            return "settled", f"at block pair {sq.settled_at}: {sq.method}, alpha {sq.alpha:g}"
        if sv.steps_needed is None:
            return "> 10⁶ pairs", "of blocks, for a saving this small"
        return f"~{sv.steps_needed}", "more steps, at the saving and spread seen"
    if sv.saving is None:
        return "–", "no block pair ran a common batch shape: run longer"
    if sv.saving.significant is None:
        return "–", f"a test needs 2 block pairs ({sv.pairs} here)"
    if sv.saving.significant:
        return "settled", "both tests significant at alpha 0.05"
    if sv.steps_needed is None:
        return "> 1000 pairs", "of blocks, for a saving this small"
    return f"~{sv.steps_needed}", "steps for 80% power at alpha 0.05"


def tokps_ci_text(tok_ci: list[float | None] | None, note: str | None) -> str:
    """``95% CI +29.9% to +51.8%``; a missing bound as ``–`` with ``note``'s reason (empty without a CI)."""
    if tok_ci is None:
        return ""
    lo, hi = (("–" if c is None else tokps_text(c)) for c in tok_ci)
    text = f"95% CI {lo} to {hi}"
    return text if note is None else f"{text}; {note}"


# ------------------------------------------------------------------------------------------------ the verdict
def saving_clause(sv: Saving) -> str:
    """The one clause a fixed-horizon saving is said in, by the statement and the saving line alike:
    ``saves 1.2 ms/step (95% CI 0.8 ms to 1.6 ms), output tok/s +5.3% (95% CI +3.4% to +7.3%)``, or in words
    that follow a CI holding zero (:func:`diff_words`)."""
    assert sv.saving is not None
    iv = sv.saving
    sign = 1 if iv.mean_ns >= 0 else -1
    if across_zero(iv):
        what = diff_words(iv, "saved", "added", per="/step")
    else:
        ci = ci_text(iv, sign)
        what = f"{'saves' if sign > 0 else 'costs'} {fmt_ns(sign * iv.mean_ns)}/step" + (f" ({ci})" if ci else "")
    if sv.tokps_change_pct is not None:
        what += f", output tok/s {tokps_text(sv.tokps_change_pct)}"
        if sv.tokps_ci_pct is not None:
            # The saving's "95% CI" just before names the level: the tok/s bounds follow without repeating it.
            what += f" ({tokps_ci_text(sv.tokps_ci_pct, sv.tokps_ci_note).removeprefix('95% CI ')})"
    return what


def _beside(sv: Saving) -> str:
    """The forward beside the lane and the arm's wait for q (the overlay log's window), as the statement ends."""
    out = ""
    if sv.forward_change is not None:
        out += f"; the forward beside the lane: {diff_words(sv.forward_change, 'slower', 'faster')}"
    if sv.arm_log_wait_ns is not None:
        out += f", the sampler waits {fmt_ns(sv.arm_log_wait_ns)} for q (log window)"
    return out


def statement(sv: Saving, subject: str, steps: int) -> str:
    """The verdict of a fixed-horizon switchback in one sentence (``Saving.statement``): the decision, what
    ``subject`` saves (:func:`saving_clause`), the pairs and steps, what would settle it, the forward and wait."""
    if sv.saving is None:
        return "inconclusive: no pair of switchback blocks ran a batch shape in common"
    base = f"{sv.decision}: {subject} {saving_clause(sv)}; {plural(sv.pairs, 'block pair')}, {plural(steps, 'step')}"
    if sv.decision == INCONCLUSIVE:
        base += " — too few pairs for a test"
    elif sv.decision == NO_DIFFERENCE:
        base += (f"; about {sv.steps_needed} steps would settle a saving this size" if sv.steps_needed is not None
                 else "; a saving this small would take more than 1000 block pairs to settle")
    return base + _beside(sv)


def sequential_statement(sv: Saving, subject: str, steps: int) -> str:
    """The verdict of a sequential switchback in one sentence: the decision, the saving with its confidence
    sequence, what it means for output tok/s, and the margin in both units."""
    seq = sv.sequence
    assert seq is not None
    margin = margin_words(seq.margin_ns, sv.baseline_cadence_ns)
    base = (f"{seq.decision}: {subject} {sequence_words(seq, sv.baseline_cadence_ns)}; "
            f"{plural(seq.pairs, 'block pair')}, {plural(steps, 'step')}")
    if seq.decision == NO_EFFECT:
        base += f"; it lies inside the margin {margin}: the overlay does not matter here"
    elif seq.decision == UNDECIDED:
        base += f"; neither outside 0 nor inside the margin {margin} when the run ended"
        base += (f"; about {sv.steps_needed} more steps would settle it" if sv.steps_needed is not None
                 else "; settling it would take more than a million block pairs")
    else:
        base += f" (settled at pair {seq.settled_at}; margin {margin})"
    return base + _beside(sv)


def saving_line_part(s: Saving) -> str:
    """One comparison's part of the saving line: the decision, :func:`saving_clause` (or the sequence's), pairs."""
    if s.saving is None:
        return f"{s.decision} — no pair of blocks ran a batch shape in common"
    if s.sequence is not None:
        return _sequence_part(s)
    return f"{s.decision} — {saving_clause(s)}, {plural(s.pairs, 'block pair')}"


def _sequence_part(s: Saving) -> str:
    """A sequential switchback's part of the line: the saving with its confidence sequence, tok/s, the margin."""
    sq = s.sequence
    assert sq is not None
    line = (f"{sq.decision} — {sequence_words(sq, s.baseline_cadence_ns)}, margin "
            f"{margin_words(sq.margin_ns, s.baseline_cadence_ns)}, {plural(s.pairs, 'block pair')}")
    if sq.settled_at is not None and sq.settled_at < sq.pairs and decide(sq.lo_ns, sq.hi_ns, sq.margin_ns) != sq.decision:
        # The decision is the first settling look's (the run stopped there); pairs in flight after it widened the
        # sequence shown (it holds at every pair at once), so the line says where it was decided.
        line += f", decided at block pair {sq.settled_at} (the pairs after it widened the sequence)"
    return line


def page_words(sv: Saving) -> dict[str, str]:
    """What the report page's saving card prints, made here so the page formats no figure itself: the saving,
    its CI column (or the confidence sequence and margin), the tok/s change with its CI, each arm's cadence
    broken down."""
    q = sv.sequence
    if q is not None:
        value = fmt_ns(q.mean_ns)
        ci = ("no confidence sequence (fewer than 6 block pairs)" if q.lo_ns is None or q.hi_ns is None
              else f"95% confidence sequence {fmt_ns(q.lo_ns)} to {fmt_ns(q.hi_ns)}")
        ci += f" · margin ±{fmt_ns(q.margin_ns)}" + (f" · settled at block pair {q.settled_at}" if q.settled_at else "")
        tok = "" if sv.tokps_change_pct is None else f"output tok/s {tokps_text(sv.tokps_change_pct)}"
    else:
        value = fmt_ns(sv.saving.mean_ns) if sv.saving is not None else "–"
        ci = ci_column(sv.saving) if sv.saving is not None else "no pair of blocks ran a batch shape in common"
        tok = "" if sv.tokps_change_pct is None else (
            f"output tok/s {tokps_text(sv.tokps_change_pct)}"
            + (f" ({tokps_ci_text(sv.tokps_ci_pct, sv.tokps_ci_note)})" if sv.tokps_ci_pct is not None else ""))

    def parts(p, arm: str) -> str:
        if p is None:
            return ""
        return (f"cadence {arm} {fmt_ns(p.cadence_ns)} = forward {fmt_ns(p.forward_ns)} + sampler "
                f"{fmt_ns(p.sampler_ns)} + rest {fmt_ns(p.rest_ns)}")

    return {"value": value, "ci": ci, "tokps": tok,
            "parts": " · ".join(x for x in (parts(sv.baseline_parts, sv.compared[0]),
                                            parts(sv.arm_parts, sv.compared[1])) if x)}

"""Switchback's figures in words: what each left-out step means, differences in words that follow their CI,
what would settle a saving, the tok/s CI without an infinity.

Shared by the estimator's statements (:mod:`expo_prof.analysis.saving.switchback`), the tables
(``terminal/saving.py``) and the saving line (``pipeline/result.py``), so every output says a figure alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from expo_prof.analysis.model import Interval, Saving, Sequence
from expo_prof.analysis.saving.sequential import MIN_PAIRS
from expo_prof.words import fmt_ns

__all__ = ["DROPPED_WORDS", "across_zero", "diff_words", "left_out_words", "margin_words", "sequence_words",
           "settle_words", "tokps_ci_text", "tokps_of"]


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
    return words if tok is None else f"{words}, output tok/s {tok:+.1f}%"


def margin_words(margin_ns: float, baseline_step_ns: float | None) -> str:
    """The margin of "no effect" in both units: ``±22.7 µs/step (±1.0% output tok/s)``."""
    tok = tokps_of(margin_ns, baseline_step_ns)
    return f"±{fmt_ns(margin_ns)}/step" + (f" (±{tok:.1f}% output tok/s)" if tok is not None else "")


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


def tokps_ci_text(tok_ci: list[float | None] | None, note: str | None, digits: int = 2) -> str:
    """``95% CI +29.95% to +51.75%``; a missing bound as ``no upper bound`` with ``note``'s reason (empty
    without a CI)."""
    if tok_ci is None:
        return ""
    lo, hi = (("–" if c is None else f"{c:+.{digits}f}%") for c in tok_ci)
    text = f"95% CI {lo} to {hi}"
    return text if note is None else f"{text}; {note}"

"""The natural experiment: the forward of steps that launched no ``q`` against launched steps of the same shape.

It needs no switchback: in any overlay run, steps whose batch launched no
``q`` (all greedy, all seeded, sampled by FlashInfer) ran their forward
without the lane; compared with launched steps of the same batch shape they
show the forward's slowdown beside the draw. A switchback rank measures that
by its block pairs already (``Saving.forward_change``), so
:func:`expo_prof.analysis.saving.recording.savings_of` gives it none: one estimate per quantity.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from expo_prof.analysis.model import Interval, Natural
from expo_prof.analysis.saving.switchback import OFF, shape_key

from expo_prof.analysis.steps.facts import ints
from expo_prof.analysis.saving.words import diff_words
from expo_prof.words import fmt_ns, plural
from expo_prof.analysis.arrays import distinct


def natural_experiment(cols: Mapping[str, np.ndarray], *, rank: int, window: np.ndarray | None = None) -> Natural | None:
    """Forward without the lane vs with it, matched by batch shape (module docstring); None: nothing to compare.

    "Without": steps that launched no ``q`` because their batch needed none
    (all greedy / all seeded / sampled by FlashInfer) — in a switchback run,
    its off-block steps.
    """
    fwd = ints(cols["fwd_ns"])
    reqs = ints(cols["reqs"])
    launched = np.asarray(cols["launched"], dtype=bool)
    phase = np.asarray(cols["phase"], dtype=object)
    block = ints(cols["block"])
    fallback = np.asarray(cols["fallback"], dtype=object)
    ok = (fwd >= 0) & (reqs > 0) & (window if window is not None else True)
    switchback = bool(((block >= 0) & (phase == OFF)).any())
    if switchback:
        without = ok & (phase == OFF) & ~launched
        basis = "switchback off blocks"
    else:
        # Batches that needed no q: all greedy, all seeded, or sampled by FlashInfer's own kernel.
        without = ok & ~launched & np.isin(fallback, ("all_greedy", "all_seeded", "flashinfer"))
        basis = "no q launched (all greedy / all seeded / FlashInfer)"
    with_ = ok & launched
    if not without.any() or not with_.any():
        return None
    shape = shape_key(reqs, cols["tokens"])
    diffs, weights, var = [], [], []
    n_wo = n_w = 0
    sum_wo = sum_w = 0.0
    for sh in distinct(shape[without | with_]):
        a, b = fwd[without & (shape == sh)].astype(float), fwd[with_ & (shape == sh)].astype(float)
        if not len(a) or not len(b):
            continue
        w = len(a) * len(b) / (len(a) + len(b))
        diffs.append(b.mean() - a.mean())
        weights.append(w)
        var.append((a.var(ddof=1) / len(a) if len(a) > 1 else math.nan)
                   + (b.var(ddof=1) / len(b) if len(b) > 1 else math.nan))
        n_wo, n_w = n_wo + len(a), n_w + len(b)
        sum_wo, sum_w = sum_wo + w * a.mean(), sum_w + w * b.mean()
    if not weights:
        return None
    wt = np.array(weights)
    est = float(np.dot(wt, diffs) / wt.sum())
    se2 = float(np.dot(wt**2, var) / wt.sum() ** 2)
    ci = None
    if math.isfinite(se2):
        # Normal approximation over the matched shapes (docs/ab.md): many steps per shape, no pairing.
        half = 1.959963984540054 * math.sqrt(se2)
        ci = [float(est - half), float(est + half)]
    slow = Interval(mean_ns=est, ci_ns=ci, t_p=None, permutation_p=None,
                    significant=None if ci is None else not (ci[0] <= 0.0 <= ci[1]))
    f_wo, f_w = float(sum_wo / wt.sum()), float(sum_w / wt.sum())
    # Words that follow the CI: "slower (CI … slower)" only when the CI lies above zero (diff_words).
    change = (diff_words(slow, "slower", "faster") if ci is not None
              else f"{fmt_ns(abs(est))} {'slower' if est >= 0 else 'faster'} (no CI: a shape with a single step)")
    statement = (f"forward without the lane {fmt_ns(f_wo)} per step ({plural(n_wo, 'step')}: {basis}), with it "
                 f"{fmt_ns(f_w)} ({plural(n_w, 'step')}), matched by batch shape: beside the draw {change}")
    return Natural(rank=rank, without_steps=n_wo, with_steps=n_w, forward_without_ns=f_wo, forward_with_ns=f_w,
                   slowdown=slow, basis=basis, statement=statement)

"""What every overlay event log of a recording says about saving: switchback's savings and the natural experiment.

The overlay-log reader keeps each log's step columns and header in ``Timeline.meta["overlay"]``;
:func:`savings_of` hands them to :mod:`expo_prof.analysis.saving.switchback` (a log in switchback mode) and to
:mod:`expo_prof.analysis.saving.natural` (any overlay log), one rank at a time.
"""

from __future__ import annotations

import numpy as np

from expo_prof.analysis.saving.natural import natural_experiment

from expo_prof.analysis.model import Natural
from expo_prof.analysis.saving.switchback import THREE_ARMS, TWO_ARMS, in_window, switchback_savings
from expo_prof.analysis.model import Saving, SequentialSpec
from expo_prof.timeline import overlay_log


def sequential_spec(manifest: dict | None) -> SequentialSpec | None:
    """How a recording's switchback decided (its manifest's ``switchback`` object, written by ``record``), or
    None: a run whose length was fixed in advance (its figure is the fixed-horizon CI)."""
    sb = manifest.get("switchback") if isinstance(manifest, dict) else None
    if not isinstance(sb, dict) or not sb.get("sequential"):
        return None
    try:
        return SequentialSpec(**{k: sb[k] for k in ("margin_ns", "margin_share", "alpha", "optimal_pairs")
                                 if sb.get(k) is not None})
    except (TypeError, ValueError):
        return SequentialSpec()


def savings_of(timelines, load_window_ns: list[int] | None = None,
               sequential: SequentialSpec | None = None) -> tuple[list[Saving], list[Natural]]:
    """Switchback savings and natural experiments of every overlay event log among ``timelines``, by rank.

    The overlay-log reader keeps each log's step columns and header in
    ``meta["overlay"]`` (the columns this module reads); other Timelines have none.
    ``load_window_ns``: the wall-clock window of the run's measured load (its manifest); only steps in it
    count, so the saving speaks of the same traffic as the run's throughput (not of its warm-up).
    ``sequential``: the run decided as it went (:func:`sequential_spec`).
    """
    savings: list[Saving] = []
    natural: list[Natural] = []
    for tl in sorted(timelines, key=lambda t: t.rank):
        ov = overlay_log(tl)
        if ov is None or not ov.steps:
            continue
        cols, block = ov.steps, ov.header_int("block_steps")
        arms = THREE_ARMS if sorted(ov.arms or []) == sorted(THREE_ARMS) else TWO_ARMS
        win = in_window(cols["t0_ns"], ov.wall_minus_mono_ns, load_window_ns)
        if not win.any():  # a log of another time than the load (or clocks that disagree): every step
            win, load_window_ns = np.ones(len(win), dtype=bool), None
        if block is not None and block >= 2:
            ranked = switchback_savings(cols, rank=tl.rank, block_steps=block, arms=arms, window=win,
                                        load_window_ns=load_window_ns, sequential=sequential)
            savings.extend(ranked)
            if any(s.forward_change is not None for s in ranked):
                # One estimate per quantity: switchback's paired forward change (on − off, by block pair) is the
                # forward beside the draw; the natural experiment over the same off blocks, unpaired, would be a
                # second figure for it that need not agree.
                continue
        n = natural_experiment(cols, rank=tl.rank, window=win)
        if n is not None:
            natural.append(n)
    return savings, natural

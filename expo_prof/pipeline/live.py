"""Where a switchback stands while it runs: the overlay's event logs read as they grow, through the pipeline's
own analysis (:func:`expo_prof.analysis.saving.recording.savings_of`), so a live look and the analysis after the run
compute the same savings and the same confidence sequence.

The comparison that decides is the overlay against the engine as shipped: ``on`` vs ``off`` with two arms
(``off`` runs the engine's own sampling), ``on`` vs ``native`` with three.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from expo_prof.analysis.saving.recording import savings_of
from expo_prof.analysis.saving.sequential import MIN_PAIRS
from expo_prof.analysis.saving.switchback import NATIVE, OFF, ON
from expo_prof.analysis.model import Saving, SequentialSpec
from expo_prof.words import UNDECIDED

__all__ = ["DECIDING", "MIN_PAIRS", "Look", "SequentialSpec", "Settler", "launch_sequence"]

#: The comparison that decides, by number of arms: (baseline, arm), the baseline being the engine as shipped.
DECIDING = {2: (OFF, ON), 3: (NATIVE, ON)}


@dataclass
class Look:
    """One look at the event logs: the deciding comparison (None before any pair) and the steps so far."""

    saving: Saving | None
    steps: int

    @property
    def settled(self) -> bool:
        sq = self.saving.sequence if self.saving is not None else None
        return sq is not None and sq.decision != UNDECIDED


class Settler:
    """Reads a run's overlay event logs as they grow and says where the sequential switchback stands."""

    def __init__(self, overlay_dir: Path, spec: SequentialSpec) -> None:
        self.overlay_dir = overlay_dir
        self.spec = spec

    def _timelines(self) -> list:
        from expo_prof.readers.overlay_log import read_overlay_log

        out = []
        for path in sorted(self.overlay_dir.glob("*.jsonl")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            # A line being written is not one yet: read up to the last whole line.
            data = data[:data.rfind(b"\n") + 1]
            if not data:
                continue
            try:
                out.append(read_overlay_log(data, path))
            except Exception:  # noqa: BLE001 - a log that cannot be read yet (no header): not a rank yet
                continue
        return out

    def look(self, load_window_ns: list[int]) -> Look:
        """The deciding comparison over the steps inside ``load_window_ns`` (wall clock), lowest rank first."""
        savings, _ = savings_of(self._timelines(), load_window_ns, self.spec)
        if not savings:
            return Look(None, 0)
        rank = min(s.rank for s in savings)
        mine = [s for s in savings if s.rank == rank]
        want = list(DECIDING.get(len(mine[0].arms), (OFF, ON)))
        deciding = next((s for s in mine if s.compared == want), mine[0])
        return Look(deciding, deciding.baseline_steps + deciding.arm_steps)




def launch_sequence(changes, margin_pct: float, optimal_pairs: int):
    """The confidence sequence on launch pairs' output tok/s changes (%) — ``ab`` across launches
    (expo_prof/record/launches.py) — the same rule as a switchback's pairs (analysis/saving/sequential.py)."""
    import numpy as np

    from expo_prof.analysis.saving.sequential import sequence

    return sequence(np.asarray(changes, dtype=float), margin_pct, optimal_pairs=optimal_pairs)

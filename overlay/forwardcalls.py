"""The model runner's forward passes, each opening a step: its arm, its ``q``, its ``fwd`` window.

The runner hook (:mod:`overlay.patches._runner`) reports each forward right
before it runs. Opening its step ends the one before (its lines are written
when their timing allows), picks the step's switchback arm, and launches ``q``
on the lane when vLLM's sampler will draw batch noise for it — so the draw
runs while the forward does. Stdlib only at import.
"""

from __future__ import annotations

from typing import Any

from overlay.arms import ArmSchedule
from overlay.contract import PHASE_ON
from overlay.draws import QSource, no_draw_reason
from overlay.laneslot import LaneSlot
from overlay.stamps import StepClock
from overlay.steplines import StepCursor
from overlay.steps import Step


class ForwardCalls:
    """Owns opening a step at each forward pass (arm, launch, anchor) and closing its ``fwd`` window."""

    def __init__(self, schedule: ArmSchedule, steps: StepCursor, slot: LaneSlot, clock: StepClock,
                 draws: QSource) -> None:
        self.schedule = schedule
        self.steps = steps
        self.slot = slot
        self.clock = clock
        self.draws = draws

    def _end_previous(self) -> None:
        # A new forward ends the open step; what the timing read now allows is written before the next starts.
        self.steps.close_current()
        self.steps.lines.flush()

    def begin(self, *, rows: int, vocab: int, dtype: Any, device: Any, all_greedy: bool, seeded_rows: int,
              tokens: int, skip: str | None) -> Step | None:
        """Open a sized step and launch its ``q`` when its arm and batch need one (:meth:`Overlay.begin_step`)."""
        self._end_previous()
        if rows <= 0:
            return None
        lane = self.slot.get(device)
        step = self.steps.open(rows, vocab, dtype, tokens)
        step.phase, step.block = self.schedule.next_arm()
        self.clock.anchor(step, lane)
        step.fallback = no_draw_reason(rows, all_greedy=all_greedy, seeded_rows=seeded_rows, skip=skip)
        # An arm without the overlay launches nothing, and has nothing to fall back from.
        if step.fallback is None and step.phase == PHASE_ON:
            self.draws.launch(step, lane, device)
        self.clock.forward_begins(step, lane)
        self.steps.current = step
        return step

    def begin_unsized(self, device: Any) -> Step:
        """Open a step for a forward whose batch the hook could not read: timed, nothing launched."""
        self._end_previous()
        lane = self.slot.get(device)
        step = self.steps.open(0, 0, None)
        self.clock.anchor(step, lane)
        self.clock.forward_begins(step, lane)
        self.steps.current = step
        return step

    def end(self, step: Step) -> None:
        """Close the forward window; a step with nothing launched is complete (its sampler takes nothing)."""
        self.clock.forward_ends(step)
        if not step.launched and step.fallback is not None:
            self.steps.lines.complete(step)

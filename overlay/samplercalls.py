"""vLLM's sampler calls, attributed to steps: which path each takes, its ``sample`` window, taking ``q``.

The first outermost sampler call after a step's forward belongs to that step:
it is timed as the step's ``sample`` window and takes the step's ``q`` when it
fits (:meth:`overlay.draws.QSource.hand_over`). Warm-up sampler calls and
calls after the step's own are only counted (``unattributed`` in the
summary); a sampler call no forward preceded (the runner hook did not fire)
gets a step line of its own. torch is imported lazily.
"""

from __future__ import annotations

from typing import Any

from overlay.arms import ArmSchedule
from overlay.contract import PHASE_ON
from overlay.draws import QSource
from overlay.events import EventLog
from overlay.laneslot import LaneSlot
from overlay.stamps import StepClock
from overlay.steplines import StepCursor
from overlay.steps import Step


class SamplerCalls:
    """Owns the attribution of sampler calls to the open step, their nesting, their path and ``sample`` window.

    ``warming_up`` comes from the caller: the overlay counts vLLM's warm-up runs.
    """

    def __init__(self, log: EventLog, schedule: ArmSchedule, steps: StepCursor, slot: LaneSlot, clock: StepClock,
                 draws: QSource) -> None:
        self.log = log
        self.schedule = schedule
        self.steps = steps
        self.slot = slot
        self.clock = clock
        self.draws = draws
        #: Nesting of the sampler calls the overlay wraps (forward_cpu calls random_sample).
        self.sample_depth = 0

    def native_sampling(self) -> bool:
        """Whether this sampler call takes vLLM's native path (which reaches ``random_sample``).

        False only in the switchback arm that samples as the engine ships (on
        CPU its fused Gumbel-argmax op): ``native`` with three arms, ``off`` with two.
        """
        step = self.steps.current
        return step is None or not self.schedule.shipped(step.phase)

    def inline_arm(self) -> bool:
        """Whether the current step is a three-arm ``off`` block: the exponential drawn inline after the forward."""
        step = self.steps.current
        return step is not None and self.schedule.inline(step.phase)

    def begin(self, *, warming_up: bool) -> Step | None:
        """Open the sampler window of the current step; returns it (None: not a step's first sampler call).

        Only the outermost wrapped call counts (``forward_cpu`` calls
        ``random_sample``); warm-up sampler calls are not steps.
        """
        self.sample_depth += 1
        step = self.steps.current
        if (self.sample_depth > 1 or warming_up or step is None or step.sample_open
                or step.sample[0] is not None or step.attributed):
            return None
        step.sample_open = True
        self.clock.sample_begins(step)
        return step

    def end(self, step: Step | None) -> None:
        """Close the window :meth:`begin` opened; the step may now be written."""
        self.sample_depth = max(0, self.sample_depth - 1)
        if step is None or not step.sample_open:
            return
        self.clock.sample_ends(step)
        step.sample_open = False
        step.attributed = True
        if step.complete:
            self.steps.lines.flush_host_timed()  # it waited for this window
        elif not step.launched:
            # Nothing of the step is pending once its sampler returned (vLLM's own path, or a fallback).
            self.steps.lines.complete(step)

    def take(self, probs: Any, use_fp64_gumbel: bool, *, warming_up: bool) -> Any:
        """The launched ``q`` for this sampler call, or None (draw inline).

        The call is attributed to the open step (closing a forward window left
        open at the launch seam); only an ``on`` step with a launched ``q``
        reaches the hand-over, which records why when that ``q`` does not fit.
        """
        step = self.steps.current
        if warming_up or (step is not None and step.attributed):
            # A warm-up run's sampler call, or one after the step's own: no step of its own.
            self.log.unattributed += 1
            return None
        if step is None:
            self._sampler_only_step(probs, use_fp64_gumbel)
            return None
        step.attributed = True
        if step.forward_open:
            step.forward_open = False
            self.clock.launch_window_ends(step)
        if step.phase != PHASE_ON:
            return None  # an arm without the overlay: the step is written when its sampler returns
        if not step.launched:
            if step.fallback is None:
                step.fallback = "no_pending"
                self.steps.lines.complete(step)
            return None
        return self.draws.hand_over(step, probs, use_fp64_gumbel)

    def _sampler_only_step(self, probs: Any, use_fp64_gumbel: bool) -> None:
        # The sampler ran and no forward step precedes it: the runner hook did
        # not fire (an unhooked vLLM variant). Visible as its own step line.
        import torch

        self.slot.get(probs.device)
        step = self.steps.open(0, 0, torch.float64 if use_fp64_gumbel else probs.dtype)
        step.attributed = True
        step.fallback = "no_pending"
        self.steps.lines.complete(step)

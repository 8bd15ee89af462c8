"""A step's timing windows: the marks taken while it runs, and reading them back.

Each window (``fwd``, ``sample``, ``wait``; the lane itself marks ``exp`` on
its draw) is a pair of marks on the lane's clock: host nanoseconds on the CPU
thread lane, events recorded on the compute stream on a device lane. Device
events are resolved later against the step's anchor, never synchronised
(:meth:`overlay.lanes.DeviceStreamLane.resolve`), which is why a step's line
may have to wait (:mod:`overlay.steplines`). With instrumentation off no
mark is taken and every window is left out. Stdlib only at import.
"""

from __future__ import annotations

import time
from typing import Any

from overlay.laneslot import LaneSlot
from overlay.steps import Step


class StepClock:
    """Owns the marks of every step's windows and turns them into offsets from the step's start.

    Reads the lane from ``slot`` at each mark (the lane is made on first use
    and dropped after a fork); takes no mark when ``instrument`` is off.
    """

    def __init__(self, slot: LaneSlot, instrument: bool) -> None:
        self.slot = slot
        self.instrument = instrument

    @property
    def final_at_once(self) -> bool:
        """Whether marks are final when taken (host clock, or none taken), so a step's line can be written now."""
        return not (self.instrument and self.slot.timing == "device")

    # -- marks, in the order a step takes them -------------------------------------------

    def anchor(self, step: Step, lane: Any) -> None:
        """The reference every device offset of ``step`` is measured from: taken before anything is launched."""
        if self.instrument:
            step.anchor = lane.anchor()

    def forward_begins(self, step: Step, lane: Any) -> None:
        """Open the ``fwd`` window (after the launch: the launch is not the forward's time)."""
        if self.instrument:
            step.fwd[0] = lane.stamp()

    def forward_ends(self, step: Step) -> None:
        """Close the ``fwd`` window when the forward returns; the step's host end is now, unless it samples later."""
        if self.instrument and self.slot.lane is not None:
            step.fwd[1] = self.slot.lane.stamp()
            step.host_end = time.monotonic_ns()

    def launch_window_ends(self, step: Step) -> None:
        """Close a ``fwd`` window opened at the launch seam: the sampler taking ``q`` ends it (logits included)."""
        if self.instrument:
            step.fwd[1] = self.slot.lane.stamp()

    def sample_begins(self, step: Step) -> None:
        """Open the ``sample`` window as the step's sampler call starts."""
        if self.instrument:
            step.sample[0] = self.slot.lane.stamp()

    def sample_ends(self, step: Step) -> None:
        """Close the ``sample`` window: the last part of the step has returned."""
        if self.instrument:
            step.sample[1] = self.slot.lane.stamp()
            step.host_end = time.monotonic_ns()

    def wait_window(self, start: Any, end: Any) -> list[Any] | None:
        """The ``wait`` window from the lane's marks around the sampler's wait for ``q``."""
        return [start, end] if self.instrument else None

    # -- reading them back ---------------------------------------------------------------

    def host_end(self, step: Step) -> int | None:
        """When the step's last part returned, in ns from its start (None when not measured)."""
        return step.host_end - step.t0_ns if self.instrument and step.host_end is not None else None

    def windows(self, step: Step) -> dict | None:
        """The step's windows as offsets from its start; None while any is unknown yet (the line waits).

        ``{}`` without instrumentation: every window is left out of the line.
        """
        if step.sample_open:
            return None  # its sampler is still running: the line waits for the window
        if not self.instrument:
            return {}
        lane = self.slot.lane
        if not lane.ready(step.draw):
            return None
        windows = {
            "fwd": step.fwd if step.fwd[0] is not None else None,
            "exp": step.draw.exp if step.draw is not None else None,
            "wait": step.wait,
            "sample": step.sample if step.sample[0] is not None and step.sample[1] is not None else None,
        }
        return lane.resolve(step.t0_ns, step.anchor, windows)

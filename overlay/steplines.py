"""Steps from opening to their ``step`` line: the open step, then the completed ones in order.

:class:`StepCursor` numbers the steps and holds the one open now;
:class:`StepLines` holds the completed ones until their lines are written.
A step is complete when nothing more happens to its ``q`` (module docstring of
:mod:`overlay.sampler`); its line is written once its timing is known and its
sampler call has returned (the ``sample`` window is part of the line). Host
timing is known at once; device events are only queried when the next step
opens (by then they have usually completed), never synchronised. The line's
fields are docs/event-log.md's ``step`` line. Stdlib only at import.
"""

from __future__ import annotations

import time
from typing import Any

from overlay.events import EventLog
from overlay.stamps import StepClock
from overlay.steps import Step, dtype_name

#: Completed steps whose device events are still pending, beyond which the
#: oldest is written without timing rather than growing without bound.
MAX_PENDING = 64


class StepLines:
    """Owns the completed steps not yet written, and the assembly of their lines."""

    def __init__(self, log: EventLog, clock: StepClock) -> None:
        self.log = log
        self.clock = clock
        #: Completed steps, oldest first, whose lines are not written yet.
        self.pending: list[Step] = []

    def reset(self) -> None:
        """Forget the parent's steps in a forked child (its lane, and their events, stayed behind)."""
        self.pending = []

    def complete(self, step: Step) -> None:
        """Mark ``step`` complete (nothing more happens to its q) and queue its line; idempotent."""
        if step.complete:
            return
        step.complete = True
        if step.draw is not None:
            # Timing lives in the draw's events, not in q: drop it now, so a
            # step waiting for its events to be read holds no device memory
            # (the sampler keeps its own reference while it samples).
            step.draw.q = None
        step.fork = None
        self.pending.append(step)
        self.flush_host_timed()

    def flush_host_timed(self) -> None:
        """Write what can be written now when the timing is final at once (host clock, or no instrumentation)."""
        if self.clock.final_at_once:
            # Device events are only queried when the next step launches (by then
            # they have usually completed): querying them now would mostly find them pending.
            self.flush()

    def flush(self, final: bool = False) -> None:
        """Write completed steps, in order, whose timing can be read now.

        ``final`` (process exit) writes the rest too, without the windows that
        are still unknown, so every step is accounted for.
        """
        while self.pending:
            step = self.pending[0]
            windows = self.clock.windows(step)
            if windows is None and not (final or len(self.pending) > MAX_PENDING):
                return  # in order: a later step's line never overtakes this one
            self.pending.pop(0)
            self.log.step(self.line(step, windows))

    def line(self, step: Step, windows: dict | None) -> dict[str, Any]:
        """The ``step`` line of ``step`` (docs/event-log.md); ``windows`` None or missing: not measured."""
        windows = windows or {}
        launched = step.launched
        return {
            "step": step.index,
            "rank": self.log.rank,
            "rows": step.rows if launched else 0,
            "vocab": step.vocab if launched else 0,
            "dtype": dtype_name(step.dtype) if step.dtype is not None else "float32",
            "launched": launched,
            "used": step.used,
            "fallback": None if step.used else step.fallback,
            "t0_ns": step.t0_ns,
            "fwd": windows.get("fwd"),
            "exp": windows.get("exp"),
            "wait": windows.get("wait"),
            "sample": windows.get("sample"),
            "host_end": self.clock.host_end(step),
            "phase": step.phase,
            "block": step.block,
            "reqs": step.rows,
            "tokens": step.tokens,
            "timing": self.clock.slot.timing,
        }


class StepCursor:
    """Owns the step open now and the numbering of all steps; a step it closes is completed into ``lines``."""

    def __init__(self, lines: StepLines) -> None:
        self.lines = lines
        #: The step whose forward ran last; its sampler call may still come. None between steps.
        self.current: Step | None = None
        self._next_index = 0

    def open(self, rows: int, vocab: int, dtype: Any, tokens: int = 0) -> Step:
        """A new step starting now, with the next index (the caller makes it current once it is set up)."""
        # Every step takes the next index, a sampler-only one too, so the log's step numbers have no gaps.
        step = Step(self._next_index, rows, vocab, dtype, time.monotonic_ns(), tokens=tokens)
        self._next_index += 1
        return step

    def close_current(self) -> None:
        """End the open step (the next one opens, or the process exits) and complete it."""
        step, self.current = self.current, None
        if step is None or step.complete:
            return
        if step.launched and not step.attributed:
            step.fallback = "not_consumed"  # its q was launched and no sampler call came for it
        self.lines.complete(step)

    def reset(self) -> None:
        """Forget the open step: in a forked child it is the parent's."""
        self.current = None

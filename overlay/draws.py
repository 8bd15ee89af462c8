"""The ``q`` of each step: drawn on the lane from a fork of vLLM's stream, and handed to the sampler.

Before the forward, the overlay launches ``q`` on the lane — the CPU lane's
thread on a spare core, or the device lane's side stream — from a fork of
vLLM's random stream (:mod:`overlay.rng`), so the draw is the one vLLM's
inline ``exponential_`` would make. When the sampler asks, the draw is handed
over only if it is exactly what vLLM would draw at that point (same rows,
vocabulary, dtype, device; stream not moved since); otherwise the step falls
back to vLLM's inline draw with the reason (docs/event-log.md, "Fallback
reasons"). vLLM's memory profiling holds reserved q the same way.
torch is imported lazily.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from overlay.contract import SPAN_WAIT
from overlay.events import EventLog
from overlay.lanes import Draw, LaneError, span
from overlay.laneslot import LaneSlot
from overlay.rng import Fork, NoiseStream
from overlay.stamps import StepClock
from overlay.steplines import StepLines
from overlay.steps import Step


def no_draw_reason(rows: int, *, all_greedy: bool, seeded_rows: int, skip: str | None) -> str | None:
    """Why vLLM draws no batch noise for this batch (the step's fallback), None when it does.

    An all-greedy batch samples no noise; when every row has its own
    generator vLLM redraws each row with it; ``skip`` names a path of
    vLLM's sampler that never reaches ``random_sample`` (:mod:`overlay.dispatch`).
    """
    if all_greedy:
        return "all_greedy"
    if seeded_rows >= rows:
        return "all_seeded"
    return skip


def misfit(probs: Any, draw: Draw, use_fp64_gumbel: bool) -> str | None:
    """Why the launched ``draw`` is not what vLLM's inline draw for ``probs`` would be; None when it is."""
    import torch

    want_dtype = torch.float64 if use_fp64_gumbel else probs.dtype
    if probs.dim() != 2 or probs.shape[0] != draw.rows:
        return "rows_mismatch"
    if probs.shape[1] != draw.vocab:
        return "vocab_mismatch"
    if want_dtype != draw.dtype:
        return "dtype_mismatch"
    if probs.device != draw.device:
        return "device_mismatch"
    return None


class Drawn(NamedTuple):
    """A launched ``q``, drawn, and the lane's marks around the wait for it."""

    q: Any
    start: Any
    end: Any


class QSource:
    """Owns the draws of ``q``: forks of vLLM's stream per device, launches, reserved q, and the hand-over.

    Steps it completes go to ``lines``; lane failures to ``slot``.
    """

    def __init__(self, log: EventLog, slot: LaneSlot, clock: StepClock, lines: StepLines) -> None:
        self.log = log
        self.slot = slot
        self.clock = clock
        self.lines = lines
        #: vLLM's random stream per device, which every q is forked from (overlay.rng).
        self._noise: dict[Any, NoiseStream] = {}
        #: Bytes of reserved q held now (memory profiling).
        self._reserved_bytes = 0

    def fork(self, device: Any) -> Fork:
        """A fork of vLLM's random stream on ``device`` to draw one q from (overlay.rng)."""
        import torch

        key = torch.device(device)
        noise = self._noise.get(key)
        if noise is None:
            noise = self._noise[key] = NoiseStream(key)
        return noise.fork()

    def launch(self, step: Step, lane: Any, device: Any) -> None:
        """Launch ``step``'s q on ``lane``; a failure leaves it unlaunched, falling back with ``error``."""
        try:
            step.fork = self.fork(device)
            step.draw = lane.launch(step.rows, step.vocab, step.dtype, device, generator=step.fork.generator)
            step.launched = True
            self.log.note_q(step.draw.q, lane)
        except Exception as exc:  # noqa: BLE001 - a lane failure is a fallback
            step.fallback = "error"
            self.slot.failed(exc)

    def reserve(self, rows: int, vocab: int, dtype: Any, device: Any) -> Draw | None:
        """Launch (and return) one ``[rows, vocab]`` q that is not a step; None for an empty size.

        Held by the runner hook through vLLM's memory profiling, so the peak it
        measures - and with it the KV-cache size - includes the one q the
        overlay keeps alive beside a running step. Pass it to :meth:`release`.
        """
        if rows <= 0 or vocab <= 0:
            return None
        lane = self.slot.get(device)
        # Drawn from a fork that is never committed: holding memory must not move vLLM's stream.
        draw = lane.launch(rows, vocab, dtype, device, generator=self.fork(device).generator)
        self._reserved_bytes += draw.q.numel() * draw.q.element_size()
        self.log.note_q(draw.q, lane, reserved=self._reserved_bytes)
        return draw

    def release(self, draw: Any) -> None:
        """Wait for a reserved q (stream order) and drop it."""
        if draw is not None:
            self.slot.lane.wait(draw)
            self._reserved_bytes -= draw.q.numel() * draw.q.element_size()
            draw.q = None

    def hand_over(self, step: Step, probs: Any, use_fp64_gumbel: bool) -> Any:
        """The launched ``q`` of ``step`` for the sampler, completing the step; None: draw inline.

        Its fallback says why not: the sampler's call does not fit the draw, the
        lane failed, or vLLM's stream moved since the fork.
        """
        drawn = self._collect(step, probs, use_fp64_gumbel)
        if isinstance(drawn, str):
            step.fallback = drawn
            self.lines.complete(step)
            return None
        fork = step.fork
        step.used = True
        step.wait = self.clock.wait_window(drawn.start, drawn.end)
        self.lines.complete(step)
        # The commit comes last: an error in the bookkeeping above reaches the guard with vLLM's
        # stream not yet moved, so the inline draw that follows takes exactly this q's noise, as
        # the other TP ranks do (docs/overlay.md, "Tensor parallelism").
        if fork is not None and not fork.commit():
            raise RuntimeError("vLLM's random generator moved during the overlay's step bookkeeping")
        return drawn.q

    def _collect(self, step: Step, probs: Any, use_fp64_gumbel: bool) -> Drawn | str:
        """``step``'s q once drawn, or the fallback reason it cannot be used."""
        draw = step.draw
        assert draw is not None
        reason = misfit(probs, draw, use_fp64_gumbel)
        if reason is not None:
            return reason
        try:
            with span(SPAN_WAIT):
                q, start, end = self.slot.lane.wait(draw)
        except LaneError as exc:
            self.slot.failed(exc)
            return "error"
        if step.fork is not None and not step.fork.unmoved():
            # Something drew from vLLM's generator since the launch: q is not what vLLM
            # would draw now, so it draws inline (overlay.rng).
            return "rng_moved"
        return Drawn(q, start, end)

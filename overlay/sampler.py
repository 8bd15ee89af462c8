"""The pending-draw registry and the overlay's ``random_sample``.

One :class:`Overlay` per process. The model-runner hook calls
:meth:`Overlay.begin_step` right before the forward pass (which launches ``q``
on the lane) and :meth:`Overlay.end_forward` after it; vLLM's sampler reaches
:func:`overlay_random_sample`, which takes that ``q`` when it fits and falls
back to vLLM's own inline draw otherwise, counting why
(docs/event-log.md, "Fallback reasons").

Step life cycle: a step opens at ``begin_step``; the first sampler call after it
is attributed to it; it completes when the sampler consumed (or refused) its
``q``, right after the forward when nothing was launched, or at the next
``begin_step`` / process exit otherwise. Completed steps are written once
their timing is known (device events are read a step later, never synced)
and their sampler call has returned (its window is part of the line).

Switchback (``EXPO_PROF_ASYNC_EXPONENTIAL=switchback``): steps run in blocks of
``block_steps``, alternately with the overlay (phase ``on``) and on vLLM's own
path (phase ``off``: nothing launched, vLLM's own sampler, the same timing).
The blocks go off, on, on, off, off, on … (pairs of adjacent blocks in
alternating order), so a drift that grows linearly over the run, such as
attention over a growing context, cancels over every two pairs instead of
always favouring the block that runs first.

The :class:`Overlay` is the entry point of both hooks; each part of the work
is one collaborator's:

* :class:`overlay.arms.ArmSchedule` — which arm each step runs (three arms: :mod:`overlay.arms`);
* :class:`overlay.laneslot.LaneSlot` — the lane, made on first use, the log header, lane failures;
* :class:`overlay.draws.QSource` — forking vLLM's stream, launching ``q``, handing it to the sampler;
* :class:`overlay.stamps.StepClock` — the marks of each step's timing windows, read back later;
* :class:`overlay.steplines.StepCursor` / :class:`~overlay.steplines.StepLines` — the open step, and the
  completed ones until their ``step`` lines can be written;
* :class:`overlay.forwardcalls.ForwardCalls` — opening a step at each forward: its arm, its ``q``, its window;
* :class:`overlay.samplercalls.SamplerCalls` — which sampler call belongs to a step, its window, taking ``q``.
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from overlay import guard
from overlay.arms import ArmSchedule, switchback_phase
from overlay.contract import DEFAULT_SWITCHBACK_BLOCK, PHASE_ON, TWO_ARMS
from overlay.draws import QSource
from overlay.events import EventLog
from overlay.forwardcalls import ForwardCalls
from overlay.lanes import CpuThreadLane, DeviceStreamLane
from overlay.laneslot import LaneSlot
from overlay.samplercalls import SamplerCalls
from overlay.stamps import StepClock
from overlay.steplines import MAX_PENDING, StepCursor, StepLines
from overlay.steps import Step

__all__ = [
    "MAX_PENDING", "Overlay", "Step", "active", "default_lane", "overlay_random_sample", "sample_with_noise",
    "sampler_window", "set_active", "switchback_phase",
]

logger = logging.getLogger("vllm.expo_prof")


def default_lane(device: Any, instrument: bool, cpus: Any = "auto") -> Any:
    """The lane for ``device``: a worker thread on CPU, a side stream elsewhere.

    ``cpus`` places the CPU lane's thread (see :class:`CpuThreadLane`).
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return CpuThreadLane(cpus=cpus)
    return DeviceStreamLane(dev, instrument=instrument)


class Overlay:
    """Launches ``q`` before each forward pass and hands it to the sampler.

    The entry points of both hooks. Owns the nesting of the vLLM calls it is
    hooked into and the reset after a fork; the rest is its collaborators'
    (module docstring).
    """

    def __init__(
        self,
        log: EventLog,
        *,
        instrument: bool = True,
        lane_factory: Callable[[Any, bool], Any] = default_lane,
        mode: str = PHASE_ON,
        block_steps: int = DEFAULT_SWITCHBACK_BLOCK,
        arms: tuple[str, ...] = TWO_ARMS,
    ) -> None:
        self.log = log
        self.instrument = instrument
        self.schedule = ArmSchedule(mode, block_steps, arms)
        self.lanes = LaneSlot(log, lane_factory, instrument=instrument, header=self.schedule.header())
        self.clock = StepClock(self.lanes, instrument)
        self.lines = StepLines(log, self.clock)
        self.steps = StepCursor(self.lines)
        self.draws = QSource(log, self.lanes, self.clock, self.lines)
        self.forward_calls = ForwardCalls(self.schedule, self.steps, self.lanes, self.clock, self.draws)
        self.sampler_calls = SamplerCalls(log, self.schedule, self.steps, self.lanes, self.clock, self.draws)
        self._pid = os.getpid()
        #: Nesting depth of vLLM's execute_model (only forwards inside it are
        #: steps) and of its warm-up runs (sampler calls there are not steps).
        self.execute_depth = 0
        self.warmup_depth = 0
        #: Nesting of hooked ``_model_forward`` calls (a subclass's override
        #: may call the hooked base): only the outermost opens a step.
        self.forward_depth = 0
        #: Nesting of hooked ``profile_run`` calls: only the outermost holds a q.
        self.profile_depth = 0
        atexit.register(self.shutdown)

    @property
    def lane(self) -> Any:
        """This process's lane, None before the first step (:class:`LaneSlot`)."""
        return self.lanes.lane

    @property
    def backend(self) -> str | None:
        """The lane's device type ("cpu", "cuda", "npu"), None before the lane exists."""
        return self.lanes.backend

    def _check_fork(self) -> None:
        # A forked child inherits this object but not the worker thread.
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self.lanes.forget()
            self.steps.reset()
            self.lines.reset()

    def lane_for(self, device: Any) -> Any:
        """The lane for ``device`` (created on first use; fixes the log header)."""
        return self.lanes.get(device)

    def notice_later(self, level: str, code: str, message: str) -> None:
        """Write a notice now when the log header is known, else once the lane exists."""
        self.lanes.notice_later(level, code, message)

    # -- model-runner side (ForwardCalls; reserved q: QSource) ----------------------

    def begin_step(self, *, rows: int, vocab: int, dtype: Any, device: Any, all_greedy: bool, seeded_rows: int,
                   tokens: int = 0, skip: str | None = None) -> Step | None:
        """Open a step right before the forward pass and launch ``q`` if needed.

        Nothing is launched for an all-greedy batch (vLLM samples no noise),
        when every row has its own generator (vLLM draws no batch noise then),
        when ``skip`` names why vLLM's sampler will not call ``random_sample``
        (e.g. ``flashinfer``, :mod:`overlay.dispatch`), or in a switchback
        ``off`` block (vLLM's own path runs, timed alike). Returns None when the
        batch has no rows to sample.
        """
        self._check_fork()
        return self.forward_calls.begin(rows=rows, vocab=vocab, dtype=dtype, device=device, all_greedy=all_greedy,
                                        seeded_rows=seeded_rows, tokens=tokens, skip=skip)

    def begin_unsized_step(self, device: Any) -> Step:
        """A forward whose batch the hook could not read: nothing launched."""
        self._check_fork()
        return self.forward_calls.begin_unsized(device)

    def end_forward(self, step: Step) -> None:
        """Close the forward window; a step with nothing launched is complete."""
        self.forward_calls.end(step)

    def reserve(self, rows: int, vocab: int, dtype: Any, device: Any) -> Any:
        """Launch (and return) one q that is not a step, held through memory profiling (:meth:`QSource.reserve`)."""
        self._check_fork()
        return self.draws.reserve(rows, vocab, dtype, device)

    def release(self, draw: Any) -> None:
        """Wait for a reserved q (stream order) and drop it."""
        self.draws.release(draw)

    # -- sampler side (SamplerCalls) ---------------------------------------------------

    def native_sampling(self) -> bool:
        """Whether this sampler call takes vLLM's native path (which reaches ``random_sample``)."""
        return self.sampler_calls.native_sampling()

    def inline_arm(self) -> bool:
        """Whether the current step is a three-arm ``off`` block: the exponential drawn inline after the forward."""
        return self.sampler_calls.inline_arm()

    def sampler_begin(self) -> Step | None:
        """Open the sampler window of the current step; returns it (None: not a step's first sampler call)."""
        self._check_fork()
        return self.sampler_calls.begin(warming_up=self.warmup_depth > 0)

    def sampler_end(self, step: Step | None) -> None:
        """Close the window :meth:`sampler_begin` opened; the step may now be written."""
        self.sampler_calls.end(step)

    def take(self, probs: Any, generators: dict, use_fp64_gumbel: bool) -> Any:
        """The launched ``q`` for this sampler call, or None (draw inline; :meth:`SamplerCalls.take`)."""
        self._check_fork()
        return self.sampler_calls.take(probs, use_fp64_gumbel, warming_up=self.warmup_depth > 0)

    # -- writing ---------------------------------------------------------------------

    def flush(self, final: bool = False) -> None:
        """Write completed steps, in order, whose timing can be read now (:meth:`StepLines.flush`)."""
        self.lines.flush(final)

    def shutdown(self) -> None:
        """Write what is left and the summary (runs at exit; idempotent; never raises)."""
        if os.getpid() != self._pid:
            return
        try:
            self.steps.close_current()
            self.flush(final=True)
        except Exception as exc:  # noqa: BLE001 - at exit too, an overlay error is one warning, not a traceback
            # The steps not yet written are lost; the lanes are still closed and the summary still written.
            guard.failed(exc)
        finally:
            self.lanes.close()
            self.log.close()


# -- the process-wide registry -------------------------------------------------------

_active: Overlay | None = None


def active() -> Overlay | None:
    """The overlay of this process when it is switched on and healthy."""
    return _active


def set_active(overlay: Overlay | None) -> None:
    """Install (or, with None, remove) the process-wide overlay."""
    global _active
    _active = overlay
    guard.set_notice_sink(overlay.notice_later if overlay is not None else None)


def sample_with_noise(probs: Any, q: Any) -> Any:
    """``argmax(probs / q)`` exactly as vLLM 0.32's ``sample_with_exponential_noise``."""
    if q.dtype == probs.dtype:
        scores = probs.div_(q)
    else:
        scores = q.reciprocal_()
        scores.mul_(probs)
    return scores.argmax(dim=-1).view(-1)


def overlay_random_sample(
    probs: Any,
    generators: dict,
    use_fp64_gumbel: bool = False,
    *,
    inline: Callable[..., Any],
    finish: Callable[[Any, Any], Any] = sample_with_noise,
    overlay: Overlay | None = None,
    draw_inline: Callable[..., Any] | None = None,
) -> Any:
    """vLLM's ``random_sample`` with the batch noise taken from the side lane.

    Same semantics as vLLM 0.32: rows with their own generator are redrawn
    with it (``q[i].exponential_(generator=g)``, in the same order), fp64
    gumbel noise when asked, then ``argmax(probs / q)``. When the lane has no
    fitting ``q`` the call is exactly ``inline(probs, generators, ...)`` —
    except in a three-arm ``off`` block when ``draw_inline`` is given (the
    engine's own ``random_sample`` draws on a side stream: vllm-ascend), which
    then samples with the noise drawn inline on the current stream.
    """
    ov = overlay if overlay is not None else _active
    if ov is None:
        return inline(probs, generators, use_fp64_gumbel)
    with sampler_window(ov):
        q = None
        try:
            q = ov.take(probs, generators, use_fp64_gumbel)
        except Exception as exc:  # noqa: BLE001 - the overlay's fault: switch it off
            guard.failed(exc)
            q = None
        if q is None:
            if draw_inline is not None and ov.inline_arm():
                return draw_inline(probs, generators, use_fp64_gumbel)
            return inline(probs, generators, use_fp64_gumbel)
        if generators:
            for i, generator in generators.items():
                q[i].exponential_(generator=generator)
        return finish(probs, q)


@contextmanager
def sampler_window(ov: Overlay):
    """Time one sampler call as the current step's ``sample`` window (errors switch the overlay off, never vLLM)."""
    try:
        step = ov.sampler_begin()
    except Exception as exc:  # noqa: BLE001
        guard.failed(exc)
        step = None
    try:
        yield step
    finally:
        try:
            ov.sampler_end(step)
        except Exception as exc:  # noqa: BLE001
            guard.failed(exc)

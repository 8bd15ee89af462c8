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

Three arms: :mod:`overlay.arms`.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from overlay import guard
from overlay.contract import (
    DEFAULT_SWITCHBACK_BLOCK,
    MODE_SWITCHBACK,
    NOTICE_LANE_ERROR,
    NOTICE_LANE_PLACEMENT,
    PHASE_NATIVE,
    PHASE_OFF,
    PHASE_ON,
    SPAN_WAIT,
    TWO_ARMS,
)
from overlay.arms import switchback_phase
from overlay.events import EventLog
from overlay.lanes import CpuThreadLane, DeviceStreamLane, Draw, LaneError, span
from overlay.rng import NoiseStream

logger = logging.getLogger("vllm.expo_prof")

#: Completed steps whose device events are still pending, beyond which the
#: oldest is written without timing rather than growing without bound.
MAX_PENDING = 64


def default_lane(device: Any, instrument: bool, cpus: Any = "auto") -> Any:
    """The lane for ``device``: a worker thread on CPU, a side stream elsewhere.

    ``cpus`` places the CPU lane's thread (see :class:`CpuThreadLane`).
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return CpuThreadLane(cpus=cpus)
    return DeviceStreamLane(dev, instrument=instrument)


@dataclass
class Step:
    """What the overlay knows about one forward pass."""

    index: int
    rows: int
    vocab: int
    dtype: Any
    t0_ns: int
    anchor: Any = None
    launched: bool = False
    used: bool = False
    fallback: str | None = None
    draw: Draw | None = None
    fwd: list[Any] = field(default_factory=lambda: [None, None])
    wait: list[Any] | None = None
    attributed: bool = False
    complete: bool = False
    #: Launched at the launch seam (no forward seam): the sampler closes the window.
    forward_open: bool = False
    #: "on": the overlay's path; "off" / "native": switchback blocks without it (overlay.contract).
    phase: str = PHASE_ON
    #: Switchback block of the step (None in "on" mode).
    block: int | None = None
    #: Tokens the forward computes (padded; 0 when the seam does not say).
    tokens: int = 0
    #: The step's sampler call (stamps), and whether it is still running.
    sample: list[Any] = field(default_factory=lambda: [None, None])
    sample_open: bool = False
    #: Host monotonic ns when the step's last part returned (its sampler, else its forward).
    host_end: int | None = None
    #: The generator fork q was drawn from (overlay.rng): committed to vLLM's stream only when used.
    fork: Any = None


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


class Overlay:
    """Launches ``q`` before each forward pass and hands it to the sampler."""

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
        #: "on" (every step on the overlay) or "switchback" (blocks alternate with vLLM's own path).
        self.mode = mode
        self.block_steps = block_steps
        #: The phases switchback blocks cycle through (overlay.contract.TWO_ARMS / THREE_ARMS).
        self.arms = tuple(arms)
        #: Sized steps opened so far: the switchback block counter.
        self._sized = 0
        #: Nesting of the sampler calls the overlay wraps (forward_cpu calls random_sample).
        self.sample_depth = 0
        self._lane_factory = lane_factory
        self.lane: Any = None
        self.backend: str | None = None
        self._current: Step | None = None
        self._pending: list[Step] = []
        self._next_index = 0
        self._lane_errors = 0
        #: Notices said before the log header is known (no lane yet).
        self._deferred: list[tuple[str, str, str]] = []
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
        #: Bytes of reserved q held now (memory profiling).
        self._reserved_bytes = 0
        #: vLLM's random stream per device, which every q is forked from (overlay.rng).
        self._noise: dict[Any, NoiseStream] = {}
        atexit.register(self.shutdown)

    # -- lane ------------------------------------------------------------------------

    def _check_fork(self) -> None:
        # A forked child inherits this object but not the worker thread.
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self.lane = None
            self._current = None
            self._pending = []

    def lane_for(self, device: Any) -> Any:
        """The lane for ``device`` (created on first use; fixes the log header)."""
        if self.lane is None:
            import torch

            self.lane = self._lane_factory(device, self.instrument)
            self.backend = torch.device(device).type
            self.log.configure(backend=self.backend, lane=self.lane.kind, mode=self.mode,
                               block_steps=self.block_steps if self.mode == MODE_SWITCHBACK else None,
                               arms=self.arms if self.mode == MODE_SWITCHBACK else None)
            for notice in self._deferred:
                self.log.notice(*notice)
            self._deferred.clear()
            placement = getattr(self.lane, "placement", None)
            if placement:
                logger.info("expo-prof overlay: %s", placement)
                self.log.notice("info", NOTICE_LANE_PLACEMENT, placement)
        return self.lane

    def notice_later(self, level: str, code: str, message: str) -> None:
        """Write a notice now when the log header is known, else once the lane exists."""
        if self.log.configured:
            self.log.notice(level, code, message)
        else:
            self._deferred.append((level, code, message))

    def _lane_error(self, exc: BaseException) -> None:
        self._lane_errors += 1
        if self._lane_errors == 1:
            message = f"side lane failed, drawing inline for that step: {exc!r}"
            logger.warning("expo-prof overlay: %s", message)
            self.log.notice("warning", NOTICE_LANE_ERROR, message + " (later lane errors are only counted)")

    # -- model-runner side ---------------------------------------------------------

    def begin_step(
        self,
        *,
        rows: int,
        vocab: int,
        dtype: Any,
        device: Any,
        all_greedy: bool,
        seeded_rows: int,
        tokens: int = 0,
        skip: str | None = None,
    ) -> Step | None:
        """Open a step right before the forward pass and launch ``q`` if needed.

        Nothing is launched for an all-greedy batch (vLLM samples no noise),
        when every row has its own generator (vLLM draws no batch noise then),
        when ``skip`` names why vLLM's sampler will not call ``random_sample``
        (e.g. ``flashinfer``, :mod:`overlay.dispatch`), or in a switchback
        ``off`` block (vLLM's own path runs, timed alike). Returns None when the
        batch has no rows to sample.
        """
        self._check_fork()
        self._close_current()
        self.flush()
        if rows <= 0:
            return None
        lane = self.lane_for(device)
        step = Step(self._next_index, rows, vocab, dtype, time.monotonic_ns(), tokens=tokens)
        self._next_index += 1
        if self.mode == MODE_SWITCHBACK:
            step.block = self._sized // self.block_steps
            step.phase = switchback_phase(self._sized, self.block_steps, self.arms)
        self._sized += 1
        if self.instrument:
            step.anchor = lane.anchor()
        if all_greedy:
            step.fallback = "all_greedy"
        elif seeded_rows >= rows:
            step.fallback = "all_seeded"
        elif skip is not None:
            step.fallback = skip
        elif step.phase != PHASE_ON:
            pass  # an arm without the overlay: nothing to launch, nothing to fall back from
        else:
            try:
                step.fork = self._fork(device)
                step.draw = lane.launch(rows, vocab, dtype, device, generator=step.fork.generator)
                step.launched = True
                self.log.note_q(step.draw.q, lane)
            except Exception as exc:  # noqa: BLE001 - a lane failure is a fallback
                step.fallback = "error"
                self._lane_error(exc)
        if self.instrument:
            step.fwd[0] = lane.stamp()
        self._current = step
        return step

    def _fork(self, device: Any) -> Any:
        """A fork of vLLM's random stream on ``device`` to draw one q from (overlay.rng)."""
        import torch

        key = torch.device(device)
        noise = self._noise.get(key)
        if noise is None:
            noise = self._noise[key] = NoiseStream(key)
        return noise.fork()

    def begin_unsized_step(self, device: Any) -> Step:
        """A forward whose batch the hook could not read: nothing launched."""
        self._check_fork()
        self._close_current()
        self.flush()
        lane = self.lane_for(device)
        step = Step(self._next_index, 0, 0, None, time.monotonic_ns())
        self._next_index += 1
        if self.instrument:
            step.anchor = lane.anchor()
            step.fwd[0] = lane.stamp()
        self._current = step
        return step

    def end_forward(self, step: Step) -> None:
        """Close the forward window; a step with nothing launched is complete."""
        if self.instrument and self.lane is not None:
            step.fwd[1] = self.lane.stamp()
            step.host_end = time.monotonic_ns()
        if not step.launched and step.fallback is not None:
            self._complete(step)

    # -- the sampler call (its window, and which path it takes) ------------------------

    def native_sampling(self) -> bool:
        """Whether this sampler call takes vLLM's native path (which reaches ``random_sample``).

        False only in the switchback arm that samples as the engine ships
        (on CPU its fused Gumbel-argmax op): ``native`` with three arms,
        ``off`` with two.
        """
        step = self._current
        return step is None or not self.shipped_arm(step)

    def shipped_arm(self, step: Step | None) -> bool:
        """Whether ``step`` runs the engine's sampling exactly as shipped (no overlay, no inline redraw)."""
        if step is None:
            return False
        return step.phase == PHASE_NATIVE or (step.phase == PHASE_OFF and len(self.arms) == 2)

    def inline_arm(self) -> bool:
        """Whether the current step is a three-arm ``off`` block: the exponential drawn inline after the forward."""
        step = self._current
        return step is not None and step.phase == PHASE_OFF and len(self.arms) > 2

    def sampler_begin(self) -> Step | None:
        """Open the sampler window of the current step; returns it (None: not a step's first sampler call).

        Only the outermost wrapped call counts (``forward_cpu`` calls
        ``random_sample``); warm-up sampler calls are not steps.
        """
        self._check_fork()
        self.sample_depth += 1
        step = self._current
        if (self.sample_depth > 1 or self.warmup_depth > 0 or step is None or step.sample_open
                or step.sample[0] is not None or step.attributed):
            return None
        step.sample_open = True
        if self.instrument:
            step.sample[0] = self.lane.stamp()
        return step

    def sampler_end(self, step: Step | None) -> None:
        """Close the window :meth:`sampler_begin` opened; the step may now be written."""
        self.sample_depth = max(0, self.sample_depth - 1)
        if step is None or not step.sample_open:
            return
        if self.instrument:
            step.sample[1] = self.lane.stamp()
            step.host_end = time.monotonic_ns()
        step.sample_open = False
        step.attributed = True
        if step.complete:
            self._flush_host_timed()  # it waited for this window
        elif not step.launched:
            # Nothing of the step is pending once its sampler returned (vLLM's own path, or a fallback).
            self._complete(step)

    # -- sampler side ----------------------------------------------------------------

    def take(self, probs: Any, generators: dict, use_fp64_gumbel: bool) -> Any:
        """The launched ``q`` for this sampler call, or None (draw inline).

        Checks that the launched draw matches what vLLM's inline draw would
        produce (rows, vocabulary, dtype incl. fp64 gumbel, device) and records
        the reason when it does not.
        """
        import torch

        self._check_fork()
        if self.warmup_depth > 0:
            self.log.unattributed += 1
            return None
        step = self._current
        if step is not None and step.attributed:
            self.log.unattributed += 1
            return None
        if step is None:
            self._sampler_only_step(probs, use_fp64_gumbel)
            return None
        step.attributed = True
        if step.forward_open:
            step.forward_open = False
            if self.instrument:
                step.fwd[1] = self.lane.stamp()
        if step.phase != PHASE_ON:
            return None  # an arm without the overlay: the step is written when its sampler returns
        if not step.launched:
            if step.fallback is None:
                step.fallback = "no_pending"
                self._complete(step)
            return None
        draw = step.draw
        assert draw is not None
        want_dtype = torch.float64 if use_fp64_gumbel else probs.dtype
        reason = None
        if probs.dim() != 2 or probs.shape[0] != draw.rows:
            reason = "rows_mismatch"
        elif probs.shape[1] != draw.vocab:
            reason = "vocab_mismatch"
        elif want_dtype != draw.dtype:
            reason = "dtype_mismatch"
        elif probs.device != draw.device:
            reason = "device_mismatch"
        if reason is not None:
            step.fallback = reason
            self._complete(step)
            return None
        try:
            with span(SPAN_WAIT):
                q, start, end = self.lane.wait(draw)
        except LaneError as exc:
            step.fallback = "error"
            self._lane_error(exc)
            self._complete(step)
            return None
        fork = step.fork
        if fork is not None and not fork.unmoved():
            # Something drew from vLLM's generator since the launch: q is not what vLLM
            # would draw now, so it draws inline (overlay.rng).
            step.fallback = "rng_moved"
            self._complete(step)
            return None
        step.used = True
        step.wait = [start, end] if self.instrument else None
        self._complete(step)
        # The commit comes last: an error in the bookkeeping above reaches the guard with vLLM's
        # stream not yet moved, so the inline draw that follows takes exactly this q's noise, as
        # the other TP ranks do (docs/overlay.md, "Tensor parallelism").
        if fork is not None and not fork.commit():
            raise RuntimeError("vLLM's random generator moved during the overlay's step bookkeeping")
        return q

    def reserve(self, rows: int, vocab: int, dtype: Any, device: Any) -> Any:
        """Launch (and return) one ``[rows, vocab]`` q that is not a step.

        Held by the runner hook through vLLM's memory profiling, so the peak it
        measures - and with it the KV-cache size - includes the one q the
        overlay keeps alive beside a running step. Pass it to :meth:`release`.
        """
        self._check_fork()
        if rows <= 0 or vocab <= 0:
            return None
        lane = self.lane_for(device)
        # Drawn from a fork that is never committed: holding memory must not move vLLM's stream.
        draw = lane.launch(rows, vocab, dtype, device, generator=self._fork(device).generator)
        self._reserved_bytes += draw.q.numel() * draw.q.element_size()
        self.log.note_q(draw.q, lane, reserved=self._reserved_bytes)
        return draw

    def release(self, draw: Any) -> None:
        """Wait for a reserved q (stream order) and drop it."""
        if draw is not None:
            self.lane.wait(draw)
            self._reserved_bytes -= draw.q.numel() * draw.q.element_size()
            draw.q = None

    def _sampler_only_step(self, probs: Any, use_fp64_gumbel: bool) -> None:
        # The sampler ran and no forward step precedes it: the runner hook did
        # not fire (an unhooked vLLM variant). Visible as its own step line.
        import torch

        self.lane_for(probs.device)
        dtype = torch.float64 if use_fp64_gumbel else probs.dtype
        step = Step(self._next_index, 0, 0, dtype, time.monotonic_ns())
        self._next_index += 1
        step.attributed = True
        step.fallback = "no_pending"
        self._complete(step)

    # -- completion and writing ----------------------------------------------------

    def _complete(self, step: Step) -> None:
        if step.complete:
            return
        step.complete = True
        if step.draw is not None:
            # Timing lives in the draw's events, not in q: drop it now, so a
            # step waiting for its events to be read holds no device memory
            # (the sampler keeps its own reference while it samples).
            step.draw.q = None
        step.fork = None
        self._pending.append(step)
        self._flush_host_timed()

    def _flush_host_timed(self) -> None:
        if not (self.instrument and getattr(self.lane, "timing", "host") == "device"):
            # Host timing is final now. Device events are only queried when the
            # next step launches (by then they have usually completed).
            self.flush()

    def _close_current(self) -> None:
        step, self._current = self._current, None
        if step is None or step.complete:
            return
        if step.launched and not step.attributed:
            step.fallback = "not_consumed"
        self._complete(step)

    def _record(self, step: Step, windows: dict | None) -> dict:
        windows = windows or {}
        launched = step.launched
        host_end = step.host_end - step.t0_ns if self.instrument and step.host_end is not None else None
        return {
            "step": step.index,
            "rank": self.log.rank,
            "rows": step.rows if launched else 0,
            "vocab": step.vocab if launched else 0,
            "dtype": _dtype_name(step.dtype) if step.dtype is not None else "float32",
            "launched": launched,
            "used": step.used,
            "fallback": None if step.used else step.fallback,
            "t0_ns": step.t0_ns,
            "fwd": windows.get("fwd"),
            "exp": windows.get("exp"),
            "wait": windows.get("wait"),
            "sample": windows.get("sample"),
            "host_end": host_end,
            "phase": step.phase,
            "block": step.block,
            "reqs": step.rows,
            "tokens": step.tokens,
            "timing": getattr(self.lane, "timing", "host"),
        }

    def _windows(self, step: Step) -> dict | None:
        if step.sample_open:
            return None  # its sampler is still running: the line waits for the window
        if not self.instrument:
            return {}
        lane = self.lane
        if not lane.ready(step.draw):
            return None
        windows = {
            "fwd": step.fwd if step.fwd[0] is not None else None,
            "exp": step.draw.exp if step.draw is not None else None,
            "wait": step.wait,
            "sample": step.sample if step.sample[0] is not None and step.sample[1] is not None else None,
        }
        return lane.resolve(step.t0_ns, step.anchor, windows)

    def flush(self, final: bool = False) -> None:
        """Write completed steps, in order, whose timing can be read now.

        ``final`` (process exit) writes the rest too, without the windows that
        are still unknown, so every step is accounted for.
        """
        while self._pending:
            step = self._pending[0]
            windows = self._windows(step)
            if windows is None and not (final or len(self._pending) > MAX_PENDING):
                return
            self._pending.pop(0)
            self.log.step(self._record(step, windows))

    def shutdown(self) -> None:
        """Write what is left and the summary (runs at exit; idempotent)."""
        if os.getpid() != self._pid:
            return
        try:
            self._close_current()
            self.flush(final=True)
        finally:
            if self.lane is not None:
                self.lane.close()
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

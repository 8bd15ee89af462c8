"""Switchback arms: which arm a step runs, and the inline draw of the three-arm ``off`` arm.

Stdlib only at import (torch lazily). Two arms (default): ``off`` = the
engine's sampling as shipped, ``on`` = the overlay.
Three arms (``EXPO_PROF_SWITCHBACK_ARMS=off,on,native``): groups of three
blocks, one per arm — ``off`` draws the exponential inline after the forward
(on the compute stream / thread: the seed's switch off), ``on`` is the
overlay, ``native`` the engine's sampling as shipped (vllm-ascend: its own
side-stream draw; vLLM CPU: the fused Gumbel op). Group ``g`` runs the arms
rotated by ``(g // 2) % 3``, reversed when ``g`` is odd, so a linear drift
cancels over every two groups and each arm takes each position alike.

:class:`ArmSchedule` is the overlay's copy of that schedule: which arm each
step it opens runs, and what that arm means for the sampler call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from overlay.contract import DEFAULT_SWITCHBACK_BLOCK, MODE_SWITCHBACK, PHASE_NATIVE, PHASE_OFF, PHASE_ON, TWO_ARMS


def switchback_phase(k: int, block_steps: int, arms: tuple[str, ...] = TWO_ARMS) -> str:
    """The phase of the ``k``-th sized step (from 0) in switchback mode.

    Two arms: blocks of ``block_steps`` steps; pair ``p`` of adjacent blocks
    runs off then on when ``p`` is even, on then off when odd: off, on, on,
    off, off, on … Three arms: group ``g`` of three blocks runs ``arms``
    rotated by ``(g // 2) % 3``, reversed when ``g`` is odd (module docstring).
    """
    block = k // block_steps
    if len(arms) == 2:
        first_off = (block // 2) % 2 == 0
        return PHASE_OFF if (block % 2 == 0) == first_off else PHASE_ON
    n = len(arms)
    group, pos = divmod(block, n)
    r = (group // 2) % n
    order = arms[r:] + arms[:r]
    return (order[::-1] if group % 2 else order)[pos]


class ArmSchedule:
    """The arm of each sized step: always ``on``, or switchback blocks cycling through ``arms``.

    Owns the block counter (sized steps opened so far) and the header fields
    the schedule puts in the event log; the overlay asks it, per sampler call,
    which path the step's arm takes.
    """

    def __init__(self, mode: str = PHASE_ON, block_steps: int = DEFAULT_SWITCHBACK_BLOCK,
                 arms: tuple[str, ...] = TWO_ARMS) -> None:
        #: "on" (every step on the overlay) or "switchback" (blocks alternate with vLLM's own path).
        self.mode = mode
        self.block_steps = block_steps
        #: The phases switchback blocks cycle through (overlay.contract.TWO_ARMS / THREE_ARMS).
        self.arms = tuple(arms)
        #: Sized steps opened so far: the block counter (a batch with no rows, a forward the hook
        #: could not size and a sampler call without a forward are not counted).
        self._sized = 0

    @property
    def switchback(self) -> bool:
        """Whether steps alternate between arms (else every step runs ``on``)."""
        return self.mode == MODE_SWITCHBACK

    def header(self) -> dict[str, Any]:
        """The schedule's fields of the event-log header (``block_steps`` / ``arms`` only in switchback)."""
        return {"mode": self.mode,
                "block_steps": self.block_steps if self.switchback else None,
                "arms": self.arms if self.switchback else None}

    def next_arm(self) -> tuple[str, int | None]:
        """The (phase, block) of the next sized step, counting it: (``on``, None) outside switchback."""
        k = self._sized
        self._sized += 1
        if not self.switchback:
            return PHASE_ON, None
        return switchback_phase(k, self.block_steps, self.arms), k // self.block_steps

    def shipped(self, phase: str) -> bool:
        """Whether ``phase`` samples exactly as the engine ships (no overlay, no inline redraw).

        ``native`` with three arms, ``off`` with two.
        """
        return phase == PHASE_NATIVE or (phase == PHASE_OFF and len(self.arms) == 2)

    def inline(self, phase: str) -> bool:
        """Whether ``phase`` is the three-arm ``off`` arm: the exponential drawn inline after the forward."""
        return phase == PHASE_OFF and len(self.arms) > 2


def inline_random_sample(probs: Any, generators: dict, use_fp64_gumbel: bool = False, *,
                         finish: Callable[[Any, Any], Any]) -> Any:
    """vllm-ascend's ``random_sample`` without its side stream: ``q`` drawn on the current stream, after the forward.

    The three-arm switchback ``off`` arm on vllm-ascend (the seed's switch
    off): the same draws in the same order as
    ``vllm_ascend/sample/sampler.py`` ``random_sample`` (one batch
    ``exponential_`` unless every row has a generator, then each seeded row
    with its own), minus ``npu_stream_switch(global_stream())`` and its
    ``wait_stream``.
    """
    import torch

    q = torch.empty_like(probs, dtype=torch.float64 if use_fp64_gumbel else probs.dtype)
    if len(generators) != probs.shape[0]:
        q.exponential_()
    for i, generator in generators.items():
        q[i].exponential_(generator=generator)
    return finish(probs, q)

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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from overlay.contract import PHASE_OFF, PHASE_ON, TWO_ARMS


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

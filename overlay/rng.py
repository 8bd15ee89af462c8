"""Keep ``q`` on vLLM's own random stream, so ranks stay in lockstep.

Under tensor parallelism every rank samples the same batch and must pick the
same tokens (with async scheduling each rank feeds its own sampled tokens
back). vLLM gets that from identical seeds and an identical sequence of
draws from the device's default generator on every rank. The overlay must
not break it when its state differs between ranks — the guard switched it off
on one rank after an internal error, a lane error made one rank draw inline
for a step, one rank's draw went unused:

* each launch draws from a **fork**: a fresh generator set to the default
  generator's state at the launch (:meth:`NoiseStream.fork`); the default
  generator itself is not touched;
* only when the sampler uses that ``q`` does the default generator take the
  fork's end state (:meth:`Fork.commit`) — exactly the state vLLM's
  inline ``q.exponential_()`` would have left, at the point it would have
  drawn. A draw that is not used (not consumed, a mismatch, a lane error, a
  rank whose overlay is off) leaves it alone, and vLLM's inline draw then
  consumes it as it would have without the overlay;
* if anything drew from the default generator between the launch and the
  sampler (the forward pass does not in vLLM's models), the fork no longer
  matches and the step falls back inline (``rng_moved``): ``q`` is never a
  value vLLM would not have drawn.

So ``q`` equals vLLM's inline draw bit for bit (same generator state, shape
and dtype; Philox on CUDA / NPU is counter based, mt19937 on CPU sequential),
and the default generator of every rank advances exactly as without the
overlay, whatever each rank's overlay does. On vLLM CPU the overlay also
moves sampling from the fused ``forward_cpu`` op to the native path; a CPU
rank whose overlay is switched off returns to the fused op (docs/overlay.md).

torch is imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Fork:
    """One launch's generator, and the default generator's state it was forked from."""

    generator: Any
    snapshot: Any
    default: Any

    def unmoved(self) -> bool:
        """Whether the default generator is still where this fork was taken (nothing drew from it since)."""
        import torch

        return bool(torch.equal(self.default.get_state(), self.snapshot))

    def commit(self) -> bool:
        """Advance the default generator past this (used) draw; False when it moved since the fork.

        The caller commits as its very last step, after its own bookkeeping: an error before the
        commit leaves the default generator where vLLM's inline draw expects it.
        """
        if not self.unmoved():
            return False
        self.default.set_state(self.generator.get_state())
        return True


def default_generator(device: Any) -> Any:
    """vLLM's random stream on ``device``: torch's default generator of that device."""
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return torch.default_generator
    mod = torch.get_device_module(dev)
    index = dev.index if dev.index is not None else mod.current_device()
    return mod.default_generators[index]


class NoiseStream:
    """Forks of one device's default generator (see the module docstring)."""

    def __init__(self, device: Any) -> None:
        import torch

        self._torch = torch
        self.device = torch.device(device)
        self.default = default_generator(self.device)

    def fork(self) -> Fork:
        """A fresh generator at the default generator's current state (host only, no device work)."""
        snapshot = self.default.get_state()
        # A fresh generator per launch: the CPU lane's thread may still be drawing
        # an unconsumed q from the previous one.
        generator = self._torch.Generator(device=self.device)
        generator.set_state(snapshot)
        return Fork(generator, snapshot, self.default)

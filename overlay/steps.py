"""What the overlay knows about one forward pass: :class:`Step`.

A step is opened by the model-runner hook (or by a sampler call no forward
preceded), filled in by the lane, the sampler and the clock as the step runs,
and written once as one ``step`` line of the event log (:mod:`overlay.steplines`).
Stdlib only: no torch at import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from overlay.contract import PHASE_ON
from overlay.lanes import Draw


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


def dtype_name(dtype: Any) -> str:
    """A torch dtype as the event log spells it: ``torch.float32`` → ``float32``."""
    return str(dtype).removeprefix("torch.")

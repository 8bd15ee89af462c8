"""Helpers for analysis tests (unique module name: imported as ``analysis_helpers``).

Timelines built by hand for interval-level checks.

Hand-built Timelines are used only where the test is about the arithmetic
(which nanoseconds are hidden); everything about real files goes through
``expo_prof.readers.load``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from expo_prof.timeline import Interner, Kind, Lane, LaneKind, Timeline

STREAM, THREAD, OVERLAY, LOGICAL = LaneKind.STREAM, LaneKind.THREAD, LaneKind.OVERLAY, LaneKind.LOGICAL


def build_timeline(lanes, events, *, rank=0, fmt="kineto", backend="cuda", step=None, meta=None) -> Timeline:
    """``lanes``: list of (LaneKind, device, name); ``events``: list of (lane, start, dur, name, Kind)."""
    names = Interner()
    ev = sorted(events, key=lambda e: (e[1], e[0]))
    return Timeline(
        rank=rank,
        source=f"hand-built rank {rank}",
        fmt=fmt,
        backend=backend,
        lanes=[Lane(k, d, n) for k, d, n in lanes],
        names=names.names,
        start=np.array([e[1] for e in ev], dtype=np.int64),
        dur=np.array([e[2] for e in ev], dtype=np.int64),
        lane=np.array([e[0] for e in ev], dtype=np.int32),
        name=np.array([names(e[3]) for e in ev], dtype=np.int32),
        kind=np.array([int(e[4]) for e in ev], dtype=np.int8),
        step=None if step is None else np.array(step, dtype=np.int64),
        meta=dict(meta or {}),
    )


from shared_paths import REALTRACES  # noqa: E402,F401  (tests/shared_paths.py)


def require(ok: bool, what: str) -> None:
    """Fail under CI=true, skip elsewhere, when a requirement is missing."""
    if not ok:
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on"):
            pytest.fail(f"missing requirement under CI=true: {what}")
        pytest.skip(f"missing requirement: {what}")


EXP_KERNEL = (
    "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
    "at::native::templates::cuda::exponential_kernel<at::CUDAGeneratorImpl*>(at::TensorIteratorBase&, double, "
    "at::CUDAGeneratorImpl*)::{lambda()#1}::operator()() const::{lambda(float)#2}>"
)
K = Kind

"""A generated CUDA trace shaped like issue 12's: per step, 99 forward kernels on stream 7 and one
exponential kernel on stream 20 overlapping them, so each draw is cut into ~100 hidden/exposed pieces.

Used by the pixel test (a few hundred steps) and by ``bench/bench_html.py`` (10,000 steps, about a
million events). Built as a :class:`~expo_prof.timeline.Timeline` directly (the arithmetic of the
page is under test, not a reader); the hidden fraction is set by the parameters and the test
compares the page's pixels with what :func:`expo_prof.analysis.overlap.hidden.analyze_timeline` computes.
"""

from __future__ import annotations

import numpy as np

from expo_prof.timeline import Kind, Lane, LaneKind, Timeline

EXP_KERNEL = (
    "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, "
    "at::native::templates::cuda::exponential_kernel<at::CUDAGeneratorImpl*>(at::TensorIteratorBase&, double, "
    "at::CUDAGeneratorImpl*)::{lambda()#1}::operator()() const::{lambda(float)#2}>"
)
FWD_KERNELS = 99


def dense_cuda_timeline(steps: int, *, hidden: float = 0.76, seed: int = 0) -> Timeline:
    """``steps`` steps of 99 forward kernels (stream 7) + one exponential kernel (stream 20) + a ProfilerStep span.

    Forward kernels last ~8 µs with ~2 µs gaps; the draw starts under kernel 40 and runs past the
    forward's end by a tail sized so that about ``hidden`` of it lies under the kernels.
    """
    rng = np.random.default_rng(seed)
    period = 10_000  # ns per forward kernel slot
    kdur = 8_000 + rng.integers(-300, 300, size=(steps, FWD_KERNELS))
    fwd_len = FWD_KERNELS * period
    under = (FWD_KERNELS - 40) * period  # the draw's part inside the forward window
    covered = under * 0.8  # kernels cover ~80 % of it
    tail = max(int(covered / hidden) - under, 0)
    step_len = fwd_len + tail + 50_000
    t0 = np.arange(steps, dtype=np.int64) * step_len
    k_start = t0[:, None] + np.arange(FWD_KERNELS, dtype=np.int64)[None, :] * period
    e_start = t0 + 40 * period + 500
    e_dur = np.full(steps, under + tail - 500, dtype=np.int64)
    names = ["void cutlass_gemm_fwd_kernel<128, 64>", EXP_KERNEL] + [f"ProfilerStep#{i}" for i in range(steps)]
    n_k = steps * FWD_KERNELS
    start = np.concatenate((k_start.ravel(), e_start, t0))
    dur = np.concatenate((kdur.ravel().astype(np.int64), e_dur, np.full(steps, step_len - 10_000, dtype=np.int64)))
    lane = np.concatenate((np.zeros(n_k, np.int32), np.ones(steps, np.int32), np.full(steps, 2, np.int32)))
    name = np.concatenate((np.zeros(n_k, np.int32), np.ones(steps, np.int32), 2 + np.arange(steps, dtype=np.int32)))
    kind = np.concatenate((np.full(n_k + steps, int(Kind.KERNEL), np.int8), np.full(steps, int(Kind.STEP), np.int8)))
    o = np.argsort(start, kind="stable")
    base = 1_700_000_000_000_000_000  # epoch ns, as Kineto's
    return Timeline(
        rank=0, source=f"generated dense CUDA trace ({steps} steps)", fmt="kineto", backend="cuda",
        lanes=[Lane(LaneKind.STREAM, "cuda:0", "stream 7"), Lane(LaneKind.STREAM, "cuda:0", "stream 20"),
               Lane(LaneKind.THREAD, "cpu", "thread 1 (python)")],
        names=names, start=start[o] + base, dur=dur[o], lane=lane[o], name=name[o], kind=kind[o],
    )

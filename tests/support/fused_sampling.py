"""GENERATED / FAKE Kineto traces of the device samplers no overlay can run beside, with known per-step figures.

No real trace of vLLM Model Runner V2, of FlashInfer's sampling kernels or of vllm-ascend's Model Runner V2 can
be recorded here (no GPU, no NPU, no CUDA vLLM), so these files are written in the Kineto JSON layout the real
profiler writes (``traceEvents``, ``X`` events, ``ProfilerStep#N`` user annotations on the host thread,
``kernel`` events on device streams 7 and 13) with the kernel names the real sources launch:

* ``_gumbel_sample_kernel`` / ``_gumbel_combine_kernel`` — vLLM 0.34.0 ``vllm/v1/worker/gpu/sample/gumbel.py``
  (the Triton kernels' names; 0.32.0 and 0.33.0 launch the same ``_gumbel_sample_kernel``);
* ``flashinfer::sampling::TopKTopPSamplingFromProbKernel<…>`` — FlashInfer 0.7.4
  ``include/flashinfer/sampling.cuh``, as CUPTI demangles a template kernel;
* ``_categorical_prepare_mass_kernel`` / ``_categorical_sample_kernel`` — the two Triton kernels of
  vllm-ascend 0.28.0rc1 – 0.30.0rc2 ``vllm_ascend/ops/triton/v2/sample/categorical_sample.py`` (its opt-in
  Model Runner V2's sampler; one uniform per row, no noise over the vocabulary). The device is named an Ascend
  NPU (FAKE) but the layout stays Kineto's: the analysis reads kernel names on streams alike.

Every figure is set by construction (:class:`Built`): each step is a 1 ms ``ProfilerStep`` window holding a
690 µs forward kernel on stream 7, then the step's sampling kernels back to back on stream 7 (2 µs apart), of
which the first ``HIDDEN_US`` run under a kernel on stream 13, then (MRV2) the 5 µs combine kernel after each
Gumbel kernel, which draws no noise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

GUMBEL = "_gumbel_sample_kernel"
COMBINE = "_gumbel_combine_kernel"
FLASHINFER = ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)2, "
              "(cub::BlockReduceAlgorithm)2, 4u, false, float, int>(float*, int*, float*, int*, unsigned int, "
              "float*, float, unsigned int, unsigned long, unsigned long)")
PREPARE_MASS = "_categorical_prepare_mass_kernel"
CATEGORICAL = "_categorical_sample_kernel"
CUDA_DEVICE = "NVIDIA H100 80GB HBM3 (FAKE)"
NPU_DEVICE = "Ascend910B2 (FAKE)"
STEP_US = 1000
FORWARD_US = 690
HIDDEN_US = 10


@dataclass
class Built:
    """A written trace and the figures its construction sets."""

    path: Path
    steps: int
    #: Mean per step of the sampling kernels' exposed time (ns): nothing else waits, so the critical path.
    critical_ns: float
    #: Mean step window (ns).
    step_ns: float

    @property
    def share(self) -> float:
        return self.critical_ns / self.step_ns


def _x(name: str, cat: str, ts: int, dur: int, pid: int, tid: int, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def write_trace(path: Path, steps: list[list[tuple[str, int]]], device: str = CUDA_DEVICE) -> Built:
    """One step per list of ``(sampling kernel name, its µs)``; returns the trace and its figures (see the
    module)."""
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    t0 = 1_000_000  # µs
    for k, kernels in enumerate(steps):
        s = t0 + k * STEP_US
        ev.append(_x(f"ProfilerStep#{k}", "user_annotation", s, STEP_US, 0, 10))
        ev.append(_x("void cutlass_80_tensorop_gemm_fwd", "kernel", s + 5, FORWARD_US, 1, 7, device=0, stream=7))
        g = s + 5 + FORWARD_US + 5
        # A compute kernel of another stream over the first sampling kernel's first HIDDEN_US: that part is hidden.
        ev.append(_x("void at::native::vectorized_elementwise_kernel<4>", "kernel", g - 20, 20 + HIDDEN_US, 1, 13,
                     device=0, stream=13))
        for name, dur in kernels:
            ev.append(_x(name, "kernel", g, dur, 1, 7, device=0, stream=7))
            g += dur + 2
            if name == GUMBEL:
                ev.append(_x(COMBINE, "kernel", g, 5, 1, 7, device=0, stream=7))
                g += 5 + 2
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": device}],
           "traceEvents": ev, "traceName": "GENERATED/FAKE: tests/support/fused_sampling.py"}
    path.write_text(json.dumps(doc))
    exposed = [(sum(dur for _, dur in kernels) - HIDDEN_US) * 1000 for kernels in steps]
    return Built(path, len(steps), sum(exposed) / len(exposed), STEP_US * 1000.0)


def mrv2_trace(folder: Path, steps: int = 6) -> Built:
    """FAKE Model Runner V2 trace: ``_gumbel_sample_kernel`` 40 µs a step (30 µs exposed), then the combine."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_trace(folder / "rank0.mrv2-FAKE.pt.trace.json", [[(GUMBEL, 40)]] * steps)


def flashinfer_trace(folder: Path, steps: int = 6) -> Built:
    """FAKE FlashInfer trace: ``TopKTopPSamplingFromProbKernel`` 70 µs a step (60 µs exposed)."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_trace(folder / "rank0.flashinfer-FAKE.pt.trace.json", [[(FLASHINFER, 70)]] * steps)


def mixed_trace(folder: Path) -> Built:
    """FAKE MRV2 trace whose top-k/top-p batches went through FlashInfer: 40 µs and 70 µs steps alternating."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_trace(folder / "rank0.mrv2-flashinfer-FAKE.pt.trace.json", [[(GUMBEL, 40)], [(FLASHINFER, 70)]] * 3)


def ascend_v2_categorical_trace(folder: Path, steps: int = 6) -> Built:
    """FAKE vllm-ascend Model Runner V2 trace (0.28.0rc1 on): per step ``_categorical_prepare_mass_kernel`` 35 µs
    then ``_categorical_sample_kernel`` 15 µs (40 µs on the critical path: 4.0 % of the 1 ms step)."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_trace(folder / "rank0.ascend-v2-categorical-FAKE.pt.trace.json",
                       [[(PREPARE_MASS, 35), (CATEGORICAL, 15)]] * steps, NPU_DEVICE)


def ascend_v2_mixed_trace(folder: Path) -> Built:
    """FAKE vllm-ascend Model Runner V2 trace whose steps alternate the Ascend Triton ``_gumbel_sample_kernel``
    (40 µs, noise inside; 0.27.1rc1's sampler) and the categorical pair (35 + 15 µs, no noise): a bound over both."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_trace(folder / "rank0.ascend-v2-gumbel-categorical-FAKE.pt.trace.json",
                       [[(GUMBEL, 40)], [(PREPARE_MASS, 35), (CATEGORICAL, 15)]] * 3, NPU_DEVICE)

"""GENERATED / FAKE Kineto traces of the GPU samplers no overlay can run beside, with known per-step figures.

No real trace of vLLM Model Runner V2 or of FlashInfer's sampling kernels can be recorded here (no GPU, no CUDA
vLLM), so these files are written in the Kineto JSON layout the real profiler writes (``traceEvents``, ``X``
events, ``ProfilerStep#N`` user annotations on the host thread, ``kernel`` events on CUDA streams 7 and 13) with
the kernel names the real sources launch:

* ``_gumbel_sample_kernel`` / ``_gumbel_combine_kernel`` — vLLM 0.34.0 ``vllm/v1/worker/gpu/sample/gumbel.py``
  (the Triton kernels' names; 0.32.0 and 0.33.0 launch the same ``_gumbel_sample_kernel``);
* ``flashinfer::sampling::TopKTopPSamplingFromProbKernel<…>`` — FlashInfer 0.7.4
  ``include/flashinfer/sampling.cuh``, as CUPTI demangles a template kernel.

Every figure is set by construction (:class:`Built`): each step is a 1 ms ``ProfilerStep`` window holding a
690 µs forward kernel on stream 7, then the sampling kernel on stream 7 of which the first ``hidden_us`` run
under a kernel on stream 13, then (MRV2) the 5 µs combine kernel, which draws no noise.
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


def write_trace(path: Path, kernels: list[tuple[str, int]]) -> Built:
    """One step per ``(sampling kernel name, its µs)``; returns the trace and its figures (see the module)."""
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    t0 = 1_000_000  # µs
    for k, (name, dur) in enumerate(kernels):
        s = t0 + k * STEP_US
        ev.append(_x(f"ProfilerStep#{k}", "user_annotation", s, STEP_US, 0, 10))
        ev.append(_x("void cutlass_80_tensorop_gemm_fwd", "kernel", s + 5, FORWARD_US, 1, 7, device=0, stream=7))
        g = s + 5 + FORWARD_US + 5
        ev.append(_x(name, "kernel", g, dur, 1, 7, device=0, stream=7))
        # A compute kernel of another stream over the sampling kernel's first HIDDEN_US: that part is hidden.
        ev.append(_x("void at::native::vectorized_elementwise_kernel<4>", "kernel", g - 20, 20 + HIDDEN_US, 1, 13,
                     device=0, stream=13))
        if name == GUMBEL:
            ev.append(_x(COMBINE, "kernel", g + dur + 2, 5, 1, 7, device=0, stream=7))
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3 (FAKE)"}],
           "traceEvents": ev, "traceName": "GENERATED/FAKE: tests/support/fused_sampling.py"}
    path.write_text(json.dumps(doc))
    exposed = [(dur - HIDDEN_US) * 1000 for _, dur in kernels]
    return Built(path, len(kernels), sum(exposed) / len(exposed), STEP_US * 1000.0)


def mrv2_trace(folder: Path, steps: int = 6) -> Built:
    """FAKE Model Runner V2 trace: ``_gumbel_sample_kernel`` 40 µs a step (30 µs exposed), then the combine."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_trace(folder / "rank0.mrv2-FAKE.pt.trace.json", [(GUMBEL, 40)] * steps)


def flashinfer_trace(folder: Path, steps: int = 6) -> Built:
    """FAKE FlashInfer trace: ``TopKTopPSamplingFromProbKernel`` 70 µs a step (60 µs exposed)."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_trace(folder / "rank0.flashinfer-FAKE.pt.trace.json", [(FLASHINFER, 70)] * steps)


def mixed_trace(folder: Path) -> Built:
    """FAKE MRV2 trace whose top-k/top-p batches went through FlashInfer: 40 µs and 70 µs steps alternating."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_trace(folder / "rank0.mrv2-flashinfer-FAKE.pt.trace.json", [(GUMBEL, 40), (FLASHINFER, 70)] * 3)

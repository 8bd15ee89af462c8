"""Recognising target instances per backend.

GIVEN hand-built Timelines holding the names each backend writes, WHEN the
default rules (or ``--op``) run, THEN exactly the draws are found, grouped as
documented, and a miss explains what was looked for.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expo_prof.analysis import analyze
from expo_prof.analysis.targets import FUSED_SAMPLERS, FusedSampler, codes_mask, find_instances
from expo_prof.errors import EXIT_NOT_FOUND, NothingFound
from expo_prof.timeline import Kind

from analysis_helpers import EXP_KERNEL, LOGICAL, STREAM, THREAD  # type: ignore[import-not-found]

CUDA_LANES = [(THREAD, "cpu", "thread 1"), (STREAM, "cuda:0", "stream 7"), (STREAM, "cuda:0", "stream 20")]


def test_cuda_exponential_kernel_is_the_instance_not_the_host_op(make_tl):
    # GIVEN a CUDA trace: the host op aten::exponential_ launches the RNG kernel on a side stream
    tl = make_tl(
        CUDA_LANES,
        [
            (0, 0, 50, "aten::exponential_", Kind.CPU_OP),
            (2, 100, 40, EXP_KERNEL, Kind.KERNEL),
            (1, 90, 100, "gemm", Kind.KERNEL),
            (2, 300, 10, "void at::native::distribution_elementwise_grid_stride_kernel<uniform_kernel>", Kind.KERNEL),
        ],
    )
    # WHEN instances are found
    inst = find_instances(tl)
    # THEN only the exponential kernel counts (not the host launch, not the uniform RNG kernel)
    assert inst.rule == "device-kernel"
    assert [tl.names[i] for i in inst.name] == [EXP_KERNEL]
    assert inst.total.tolist() == [40]


def test_cpu_op_is_used_only_without_device_kernels(make_tl):
    # GIVEN a CPU-only trace with two exponential ops, one re-entrant (nested inside the other)
    tl = make_tl(
        [(THREAD, "cpu", "thread 1")],
        [
            (0, 0, 100, "aten::exponential_", Kind.CPU_OP),
            (0, 10, 20, "aten::exponential_", Kind.CPU_OP),
            (0, 200, 30, "aten::exponential_", Kind.CPU_OP),
        ],
        backend="cpu",
    )
    inst = find_instances(tl)
    # THEN both outer draws are instances; the nested call is the same draw
    assert inst.rule == "cpu-op"
    assert inst.start.tolist() == [0, 200] and inst.total.tolist() == [100, 30]


def test_overlay_span_on_a_stream_wins_over_the_kernel_inside(make_tl):
    # GIVEN the overlay's gpu_user_annotation around the draw's kernels on the side stream
    tl = make_tl(
        CUDA_LANES,
        [
            (2, 100, 60, "expo_prof::exponential", Kind.ANNOTATION),
            (2, 105, 40, EXP_KERNEL, Kind.KERNEL),
            (0, 0, 10, "expo_prof::exponential", Kind.ANNOTATION),  # host copy: launch time, not the draw
        ],
    )
    inst = find_instances(tl)
    assert inst.rule == "overlay-span"
    assert inst.lane.tolist() == [2] and inst.total.tolist() == [60]


@pytest.mark.parametrize(
    "name",
    ["aclnnExponential_DSARandomUniform_DSARandomUniform", "aclnnSimThreadExponential", "Exponential"],
)
def test_ascend_fused_kernel_names(make_tl, name):
    tl = make_tl(
        [(STREAM, "npu:0", "Stream 2"), (STREAM, "npu:0", "Stream 3")],
        [(1, 0, 30, name, Kind.KERNEL), (0, 0, 100, "MatMulV2", Kind.KERNEL), (0, 200, 5, "ExponentialGrad", Kind.KERNEL)],
        fmt="ascend-kernel-csv",
        backend="npu",
    )
    inst = find_instances(tl)
    assert [tl.names[i] for i in inst.name] == [name]


CHAIN = ["DSARandomUniform", "Neg", "Add", "GreaterEqual", "MaskedFill", "Log", "Mul"]


def test_ascend_composite_chain_is_one_draw(make_tl):
    # GIVEN the seven kernels of the composite exponential, twice, on side stream 3,
    # and the same op names on the compute stream without the DSARandomUniform head
    ev = []
    for base in (0, 1000):
        ev += [(1, base + 10 * i, 8, n, Kind.KERNEL) for i, n in enumerate(CHAIN)]
    ev += [(0, 5 + 10 * i, 8, n, Kind.KERNEL) for i, n in enumerate(CHAIN[1:])]
    tl = make_tl([(STREAM, "npu:0", "Stream 2"), (STREAM, "npu:0", "Stream 3")], ev, fmt="ascend-trace-view", backend="npu")
    inst = find_instances(tl)
    # THEN each chain is ONE instance of seven members, its time the sum of the members
    assert inst.rule == "ascend-chain" and len(inst) == 2
    assert inst.total.tolist() == [7 * 8, 7 * 8]
    assert (inst.start.tolist(), inst.end.tolist()) == ([0, 1000], [68, 1068])
    assert len(inst.events) == 14


def test_broken_ascend_chain_is_not_a_draw(make_tl):
    # GIVEN a uniform draw followed by something else than the chain (a dropout mask, say)
    ev = [(0, 10 * i, 8, n, Kind.KERNEL) for i, n in enumerate(["DSARandomUniform", "Neg", "Add", "Cast", "MaskedFill", "Log", "Mul"])]
    tl = make_tl([(STREAM, "npu:0", "Stream 2")], ev, backend="npu")
    with pytest.raises(NothingFound) as ei:
        analyze([tl])
    # THEN nothing is found, and the message names the uniform kernel as a similar name
    assert ei.value.exit_code == EXIT_NOT_FOUND
    full = " ".join([str(ei.value), *ei.value.details])  # the short line and its details list
    assert "DSARandomUniform" in full and "looked for" in full


def test_op_prefers_device_work_then_hccl_ops_then_host(make_tl):
    # GIVEN nccl names on a host thread, as a gpu_user_annotation and as a kernel
    tl = make_tl(
        CUDA_LANES,
        [
            (0, 0, 10, "nccl:all_reduce", Kind.CPU_OP),
            (2, 100, 50, "nccl:all_reduce", Kind.ANNOTATION),
            (2, 101, 48, "ncclKernel_AllReduce_RING_LL_Sum_float", Kind.COMM),
        ],
    )
    inst = find_instances(tl, re.compile("nccl"))
    # THEN the kernel is the instance (the annotation around it is not work)
    assert [tl.names[i] for i in inst.name] == ["ncclKernel_AllReduce_RING_LL_Sum_float"]
    # AND on Ascend the HCCL op spans (a profiler-derived lane) are found when no stream task matches
    tl2 = make_tl(
        [(STREAM, "npu:0", "Stream 2"), (LOGICAL, "npu:0", "HCCL communication"), (THREAD, "cpu", "CANN")],
        [(1, 0, 500, "hcom_allReduce__1_0_1", Kind.COMM), (2, 0, 5, "AscendCL@hcom_allReduce_", Kind.RUNTIME)],
        backend="npu",
    )
    inst2 = find_instances(tl2, re.compile("hcom_"))
    assert [tl2.names[i] for i in inst2.name] == ["hcom_allReduce__1_0_1"]


def test_nothing_found_lists_looked_for_and_similar_names(make_tl):
    # GIVEN a trace with a uniform RNG but no exponential
    tl = make_tl(
        CUDA_LANES,
        [(0, 0, 5, "aten::uniform_", Kind.CPU_OP), (1, 10, 5, "distribution_elementwise_grid_stride_kernel<uniform>", Kind.KERNEL)],
    )
    with pytest.raises(NothingFound) as ei:
        analyze([tl])
    msg = " ".join([str(ei.value), *ei.value.details])  # the short line and its details list
    # THEN the message says what was looked for and which similar names exist, on one line
    assert "exponential_kernel" in msg and "aclnnExponential" in msg and "aten::exponential_" in msg
    assert "aten::uniform_" in msg and "--op" in msg
    assert "\n" not in msg
    # AND with --op, similar means similar to the pattern
    with pytest.raises(NothingFound) as ei2:
        analyze([tl], op="uniform_kernel")
    assert "distribution_elementwise_grid_stride_kernel<uniform>" in " ".join(ei2.value.details)


MRV2_KERNEL = "_gumbel_sample_kernel"
FLASHINFER_KERNELS = [
    "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)2, "
    "(cub::BlockReduceAlgorithm)2, 4u, false, float, int>(float*, int*, int*, int*, unsigned int, float*, float, unsigned int, unsigned long, unsigned long)",
    "void flashinfer::sampling::TopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)2, (cub::BlockReduceAlgorithm)2, 4u, false, float, int>",
    "void flashinfer::sampling::TopKSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)2, (cub::BlockReduceAlgorithm)2, 4u, false, float, int>",
    "void flashinfer::sampling::SamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)2, (cub::BlockReduceAlgorithm)2, 4u, false, float, int>",
    "void flashinfer::sampling::SamplingFromLogitsKernel<1024u, (cub::BlockScanAlgorithm)2, (cub::BlockReduceAlgorithm)2, 4u, false, float, int>",
    # FlashInfer 0.7.4 (include/flashinfer/sampling.cuh): draws curand uniforms inside too
    "void flashinfer::sampling::SplitRowRejectionSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)2, 4u, 0u, false, float, int>",
]
#: vllm-ascend 0.28.0rc1 – 0.30.0rc2 Model Runner V2 (vllm_ascend/ops/triton/v2/sample/categorical_sample.py): the
#: two Triton kernels of categorical_sample, one uniform per row, no noise over the vocabulary.
CATEGORICAL_KERNELS = ["_categorical_prepare_mass_kernel", "_categorical_sample_kernel"]


def _fused_trace(make_tl, name):
    """Two sampling kernels on stream 20, a gemm on stream 7 covering 30 ns of the first."""
    return make_tl(
        CUDA_LANES,
        [
            (0, 0, 20, "aten::argmax", Kind.CPU_OP),
            (1, 70, 60, "gemm", Kind.KERNEL),  # covers [100,130) of the first sampling kernel
            (2, 100, 50, name, Kind.KERNEL),
            (2, 400, 40, name, Kind.KERNEL),  # nothing under it: fully exposed
            (1, 200, 50, "softmax", Kind.KERNEL),
        ],
    )


@pytest.mark.parametrize(
    ("name", "rule"), [(MRV2_KERNEL, "mrv2-fused-gumbel")] + [(n, "flashinfer-sampling") for n in FLASHINFER_KERNELS]
    + [(n, "ascend-v2-categorical") for n in CATEGORICAL_KERNELS]
)
def test_fused_sampling_kernels_are_upper_bound_fallbacks(make_tl, name, rule):
    # GIVEN a CUDA trace without an exponential kernel: the noise is drawn inside the sampling kernel
    tl = _fused_trace(make_tl, name)
    # WHEN instances are found and analysed
    inst = find_instances(tl)
    r = analyze([tl])
    # THEN each sampling kernel is one instance under its own rule, hidden only where the gemm overlaps
    assert inst.rule == rule
    assert [tl.names[i] for i in inst.name] == [name, name]
    assert inst.start.tolist() == [100, 400] and inst.total.tolist() == [50, 40]
    assert r.ranks[0].rule == rule
    assert (r.summary.total_ns, r.summary.hidden_ns, r.summary.exposed_ns) == (90, 30, 60)


def test_mrv2_and_flashinfer_kernels_in_one_trace_are_both_draws(make_tl):
    # GIVEN both fallbacks in one trace: vLLM 0.34's MRV2 sampler (_sample_random) sends a batch with top-k/top-p
    # through FlashInfer and every other batch through its own Gumbel kernel, so each step holds one or the other
    tl = make_tl(CUDA_LANES, [(2, 0, 10, FLASHINFER_KERNELS[0], Kind.KERNEL), (2, 50, 10, MRV2_KERNEL, Kind.KERNEL)])
    # WHEN instances are found
    inst = find_instances(tl)
    # THEN both kernels are instances, each under its own rule (none of a step's sampling is left out)
    assert sorted(zip(inst.start.tolist(), inst.rules)) == [(0, "flashinfer-sampling"), (50, "mrv2-fused-gumbel")]
    assert analyze([tl]).ranks[0].rule == "flashinfer-sampling+mrv2-fused-gumbel"


def test_ascend_v2_categorical_kernels_are_each_an_instance_and_draw_no_noise(make_tl):
    # GIVEN vllm-ascend's Model Runner V2 sampling one step with categorical_sample: the prepare kernel, then the
    # sample kernel on the same stream (an NPU's lanes: the rule reads names on streams alike)
    npu = [(THREAD, "cpu", "thread 1"), (STREAM, "npu:0", "stream 2"), (STREAM, "npu:0", "stream 3")]
    tl = make_tl(npu, [(1, 0, 100, "MatMulV2", Kind.KERNEL), (1, 110, 35, CATEGORICAL_KERNELS[0], Kind.KERNEL),
                       (1, 147, 15, CATEGORICAL_KERNELS[1], Kind.KERNEL)])
    # WHEN instances are found
    inst = find_instances(tl)
    # THEN each kernel is one instance of rule ascend-v2-categorical, and that sampler draws no noise (no switchback)
    assert inst.rule == "ascend-v2-categorical" and inst.rules == ["ascend-v2-categorical"] * 2
    assert [tl.names[i] for i in inst.name] == CATEGORICAL_KERNELS and inst.total.tolist() == [35, 15]
    sampler = FUSED_SAMPLERS["ascend-v2-categorical"]
    assert sampler.noise is False and sampler.switchback is False
    # AND every other fused sampler draws its noise inside (the field's default)
    assert all(k.noise for r, k in FUSED_SAMPLERS.items() if r != "ascend-v2-categorical")


def test_a_sampler_without_noise_cannot_have_switchback():
    # GIVEN a sampler declared without noise but with switchback THEN it is refused: nothing to move off the step
    with pytest.raises(ValueError, match="no switchback"):
        FusedSampler("an engine", "kernel", True, noise=False)


def test_ascend_gumbel_port_and_categorical_kernels_in_one_trace_are_both_found(make_tl):
    # GIVEN vllm-ascend's Ascend Triton _gumbel_sample_kernel (up to 0.27.1rc1) beside the categorical pair
    tl = make_tl(CUDA_LANES, [(2, 0, 10, MRV2_KERNEL, Kind.KERNEL), (2, 50, 10, CATEGORICAL_KERNELS[0], Kind.KERNEL),
                              (2, 62, 5, CATEGORICAL_KERNELS[1], Kind.KERNEL)])
    # THEN all three are instances, each under its own rule
    inst = find_instances(tl)
    assert sorted(zip(inst.start.tolist(), inst.rules)) == [
        (0, "mrv2-fused-gumbel"), (50, "ascend-v2-categorical"), (62, "ascend-v2-categorical")]
    assert analyze([tl]).ranks[0].rule == "ascend-v2-categorical+mrv2-fused-gumbel"


def test_mrv2_combine_kernel_draws_no_noise(make_tl):
    # GIVEN vLLM 0.34's two MRV2 Triton kernels: _gumbel_sample_kernel (noise + block argmax) and
    # _gumbel_combine_kernel (only the argmax of the blocks' maxima)
    tl = make_tl(CUDA_LANES, [(2, 0, 10, MRV2_KERNEL, Kind.KERNEL), (2, 12, 3, "_gumbel_combine_kernel", Kind.KERNEL)])
    # THEN only the first is a draw
    inst = find_instances(tl)
    assert inst.rule == "mrv2-fused-gumbel" and [tl.names[i] for i in inst.name] == [MRV2_KERNEL]


def test_cpu_model_runner_v2_op_is_a_fallback_after_the_v1_op(make_tl):
    # GIVEN a CPU trace of vLLM 0.34's CPU Model Runner V2 (vllm/_cpu_ops.py: torch.ops._C.gumbel_sample_cpu)
    cpu = [(THREAD, "cpu", "thread 1")]
    tl = make_tl(cpu, [(0, 0, 10, "aten::linear", Kind.CPU_OP), (0, 60, 20, "_C::gumbel_sample_cpu", Kind.CPU_OP)])
    # THEN that op is the draw (rule cpu-mrv2-gumbel); beside V1's fused op (0.32 – 0.33), V1's wins
    inst = find_instances(tl)
    assert inst.rule == "cpu-mrv2-gumbel" and inst.total.tolist() == [20]
    tl2 = make_tl(cpu, [(0, 0, 10, "_C::gumbel_sample_cpu", Kind.CPU_OP), (0, 30, 10, "_C::fused_gumbel_argmax", Kind.CPU_OP)])
    assert find_instances(tl2).rule == "cpu-fused-gumbel"


@pytest.mark.parametrize("name", [MRV2_KERNEL, FLASHINFER_KERNELS[0]])
def test_exponential_kernel_wins_over_fused_sampling_kernels(make_tl, name):
    # GIVEN the overlay's exponential kernel and a sampling kernel (e.g. FlashInfer partly applicable)
    tl = make_tl(CUDA_LANES, [(2, 100, 40, EXP_KERNEL, Kind.KERNEL), (1, 300, 30, name, Kind.KERNEL)])
    # WHEN instances are found
    inst = find_instances(tl)
    # THEN the exponential kernel is the draw; the sampling kernel is not counted
    assert inst.rule == "device-kernel"
    assert [tl.names[i] for i in inst.name] == [EXP_KERNEL]


@pytest.mark.parametrize("name", ["MinPSamplingFromProbKernelX", "ChainSpeculativeSampling", "sampling_from_probs"])
def test_other_names_are_not_flashinfer_sampling_kernels(make_tl, name):
    # GIVEN names that are not FlashInfer's sampling kernels (host op, speculative chain, a longer token)
    tl = make_tl(CUDA_LANES, [(2, 0, 10, name, Kind.KERNEL), (1, 0, 10, "gemm", Kind.KERNEL)])
    # THEN nothing is found
    assert len(find_instances(tl)) == 0


def test_nothing_found_names_the_fused_sampling_kernels(make_tl):
    # GIVEN a CUDA trace with no target at all
    tl = make_tl(CUDA_LANES, [(1, 0, 10, "gemm", Kind.KERNEL)])
    with pytest.raises(NothingFound) as ei:
        analyze([tl])
    # THEN the message names MRV2's, FlashInfer's and vllm-ascend's categorical kernels among what was looked for
    msg = " ".join([str(ei.value), *ei.value.details])  # the short line and its details list
    assert "_gumbel_sample_kernel" in msg and "SamplingFromProbKernel" in msg and "SamplingFromLogitsKernel" in msg
    assert all(k in msg for k in CATEGORICAL_KERNELS)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_codes_mask_is_the_gather_of_its_table(data):
    # GIVEN a table of up to 12 codes, any of them marked, and a column of codes into it
    n = data.draw(st.integers(1, 12))
    hit = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    dtype = data.draw(st.sampled_from([np.int8, np.int32]))
    codes = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=40)), dtype=dtype)
    # WHEN the rows of the marked codes are taken (compared when few are marked, gathered when many)
    got = codes_mask(codes, hit)
    # THEN they are the gather's, as a new bool array
    assert got.dtype == bool and got.tolist() == hit[codes].tolist()

"""Recognise target instances (the exponential draw, or any ``--op``) in a Timeline.

One *instance* is one draw: usually one event, but on Ascend a float
``exponential_`` is a chain of kernels on one stream, grouped into one
instance: op-plugin's ``op_api::exponential_``
(op_plugin/ops/opapi/ExponentialKernelNpuOpApi.cpp, every SoC before
Ascend950) runs ``uniform_ → neg_ → add_(1) → (self >= 1-eps) → masked_fill_ →
log_ → mul_(-1/λ)``, whose kernels are ``DSARandomUniform → Neg → Add →
GreaterEqual → MaskedFill → Log → Mul`` (torch_npu names them
``aclnnInplaceUniform_DSARandomUniform_DSARandomUniform``,
``aclnnInplaceMuls_MulAiCore_Mul`` …: the op type is the last token);
vllm-ascend #13394 lists the same sequence without the comparison, which
some traces do not show as a kernel of its own. Both are one instance (rule
``ascend-chain``): the kernels from the uniform to the last ``Mul`` on that
stream. vllm-ascend's own ``random_sample`` (#4908: ``q.exponential_()`` on a
global side stream, joined with ``wait_stream``) draws its noise this way, so
an unpatched vllm-ascend trace has one instance per draw there.

Rules, first one that matches anything wins (per Timeline):

1. ``--op REGEX`` (when given): every event whose name matches (``re.search``),
   step markers excluded. Device-lane matches win over overlay-log matches,
   which win over host-thread matches, so ``--op nccl`` selects the NCCL
   kernels on the streams and not the host ``nccl:all_reduce`` ops that
   launched them. Profiler-derived lanes (Ascend HCCL communication ops)
   come right after device work.
2. The overlay's ``expo_prof::exponential`` span on a device stream (a
   ``gpu_user_annotation``) or the overlay event log's exponential window.
3. Device kernels: CUDA/ROCm ``exponential_kernel`` (inside
   ``distribution_elementwise…`` kernel names), Ascend ``aclnnExponential`` /
   ``aclnnSimThreadExponential`` / ``Exponential``, and the Ascend composite
   chain.
3b. Only when no exponential kernel or chain is found on the device streams:
   kernels that draw their noise *inside* the sampling kernel, so the instance
   is the whole sampling kernel — an upper bound of the noise time (the most an
   async exponential could win): vLLM Model Runner V2's fused Gumbel-max Triton
   kernel ``_gumbel_sample_kernel`` (rule ``mrv2-fused-gumbel``; the same name in
   vllm-ascend's Ascend Triton port of it, which its opt-in Model Runner V2 ran up
   to 0.27.1rc1) and
   FlashInfer's sampling kernels ``SamplingFromLogitsKernel``,
   ``SamplingFromProbKernel``, ``TopKSamplingFromProbKernel``,
   ``TopPSamplingFromProbKernel``, ``MinPSamplingFromProbKernel``,
   ``TopKTopPSamplingFromProbKernel``, ``SplitRowRejectionSamplingFromProbKernel``
   (rule ``flashinfer-sampling``; FlashInfer 0.7.4 ``include/flashinfer/sampling.cuh``:
   each calls ``curand_init`` / ``curand_uniform`` inside). Both when both are
   present: MRV2 (vLLM 0.34 ``vllm/v1/worker/gpu/sample/sampler.py``,
   ``_sample_random``) samples a batch with top-k / top-p through FlashInfer and
   every other batch through ``_gumbel_sample_kernel``, so one trace holds both,
   a step one or the other. (MRV2's ``_gumbel_combine_kernel``, 0.34, and
   ``_temperature_kernel`` draw no noise: not instances.)
   Also vllm-ascend's opt-in Model Runner V2 (``VLLM_USE_V2_MODEL_RUNNER=1``) from
   0.28.0rc1 on (rule ``ascend-v2-categorical``): its ``patch_triton`` replaces
   ``gumbel_sample`` with ``categorical_sample``
   (``vllm_ascend/ops/triton/v2/sample/categorical_sample.py``), two Triton kernels
   per sampling call, ``_categorical_prepare_mass_kernel`` (block maxima and
   probability masses of the logits) and ``_categorical_sample_kernel``
   (inverse-CDF pick). They draw *one uniform per row and no noise over the
   vocabulary*, so there is nothing for an async draw to take off: their time is
   a sampling cost, not a bound (``FusedSampler.noise`` false). Each kernel event
   is an instance, as with the other fused rules: both are the sampler's work and
   the step's figures add them up.
4. Only when the Timeline has no device kernels at all (a CPU run): the
   ``expo_prof::exponential`` span on a host thread, else ``aten::exponential_``,
   else vLLM CPU's fused Gumbel-max op ``_C::fused_gumbel_argmax`` (the V1
   runner's ``TopKTopPSampler.forward_cpu``, vLLM 0.32 – 0.33: the noise is drawn
   inside the op, fused with the argmax, so the instance is an upper bound of the
   noise time; rule ``cpu-fused-gumbel``), else vLLM CPU's Model Runner V2 op
   ``_C::gumbel_sample_cpu`` (0.34 on, ``vllm/_cpu_ops.py`` called by
   ``vllm/v1/worker/cpu/gumbel.py``: noise inside too; rule ``cpu-mrv2-gumbel``).

Which of these fused samplers the overlay (and so switchback) can run beside is
:data:`FUSED_SAMPLERS`: the analysis bounds what an async draw could save on
the others, and states the sampling cost where the sampler draws no noise over
the vocabulary (:mod:`expo_prof.analysis.bound`).

Host-side spans are not used when device kernels exist: on CUDA/NPU the host
span measures the launch, not the draw.
"""

from __future__ import annotations

import difflib
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from expo_prof.timeline import Kind, LaneKind, Timeline, event_count, name_counts
from overlay.contract import SPAN_EXPONENTIAL, SPAN_FORWARD, SPAN_WAIT  # the one shared contract

__all__ = ["FUSED_SAMPLERS", "SPAN_EXPONENTIAL", "SPAN_FORWARD", "SPAN_WAIT", "FusedSampler", "Instances", "find_instances",
           "similar_names"]

#: CUDA/ROCm: the kernel PyTorch launches for ``Tensor.exponential_``.
CUDA_KERNEL_RE = re.compile(r"exponential_kernel")
#: Ascend fused exponential kernels / ops.
ASCEND_KERNEL_RE = re.compile(
    r"aclnn(?:SimThread)?Exponential(?![A-Za-z])"  # aclnnExponential_<kernel>, aclnnSimThreadExponential
    r"|(?<![A-Za-z])Exponential(?:V\d+)?(?![A-Za-z0-9])"  # the op type alone, not ExponentialGrad
)
#: vLLM Model Runner V2: Gumbel noise + argmax in one Triton kernel (upper bound of the noise).
MRV2_GUMBEL_RE = re.compile(r"_gumbel_sample_kernel")
#: FlashInfer sampling kernels (include/flashinfer/sampling.cuh): the uniforms are drawn inside.
FLASHINFER_SAMPLING_RE = re.compile(
    r"(?<![A-Za-z])(?:TopKTopP|TopK|TopP|MinP|SplitRowRejection)?SamplingFrom(?:Logits|Prob)Kernel(?![A-Za-z0-9])")
#: vllm-ascend's Model Runner V2 (0.28.0rc1 on) ``categorical_sample``: its two Triton kernels, one uniform per row.
ASCEND_V2_CATEGORICAL_RE = re.compile(r"_categorical_(?:prepare_mass|sample)_kernel")
#: Device fallbacks (rule, pattern): tried only when no exponential kernel is found; every one found counts.
FUSED_DEVICE_RULES = (("mrv2-fused-gumbel", MRV2_GUMBEL_RE), ("flashinfer-sampling", FLASHINFER_SAMPLING_RE),
                      ("ascend-v2-categorical", ASCEND_V2_CATEGORICAL_RE))
#: CPU operator.
CPU_OP_NAME = "aten::exponential_"
#: vLLM CPU's V1 sampler (0.32 – 0.33 ``forward_cpu``): Gumbel noise and argmax in one C++ op.
CPU_FUSED_GUMBEL = "_C::fused_gumbel_argmax"
#: vLLM CPU's Model Runner V2 sampler (0.34 on): Gumbel noise and argmax in one C++ op.
CPU_MRV2_GUMBEL = "_C::gumbel_sample_cpu"


@dataclass(frozen=True)
class FusedSampler:
    """A sampler whose random numbers are drawn inside its own kernel / op (the instance is the whole of it):
    noise over the vocabulary, or (``noise`` false) one uniform per row."""

    #: The engine and its kernel in words, for the saving line.
    engine: str
    #: "kernel" (device) or "op" (CPU operator).
    what: str
    #: Whether the overlay can run on that engine, so switchback can measure the saving there: the V1 runner's
    #: CPU op is replaced by the overlay's path (docs/overlay.md); MRV2 (vLLM's only runner from 0.34) and the
    #: batches FlashInfer samples never reach ``random_sample``, so no overlay and no switchback exist there.
    switchback: bool
    #: Whether it draws noise over the whole vocabulary (then its time bounds what an async draw could save).
    #: False for inverse-CDF samplers that draw one uniform per row: no noise to move off the critical path,
    #: so their time is a sampling cost and nothing an async draw could save.
    noise: bool = True
    #: Where the exponential draw can be measured instead, for the saving line's tail (empty: nothing to add).
    instead: str = ""

    def __post_init__(self) -> None:
        # No noise, no draw for the overlay to move: switchback could only compare a sampler with itself.
        if not self.noise and self.switchback:
            raise ValueError(f"{self.engine}: a sampler without noise has no switchback")


#: The rules whose instances are whole sampling kernels / ops with their random numbers drawn inside.
FUSED_SAMPLERS = {
    "mrv2-fused-gumbel": FusedSampler(
        "vLLM Model Runner V2 (and vllm-ascend's Ascend Triton port of it, up to 0.27.1rc1) draws its noise inside "
        "its fused Triton Gumbel kernel (_gumbel_sample_kernel)",
        "kernel", False),
    "flashinfer-sampling": FusedSampler(
        "FlashInfer's sampling kernels draw their own random numbers (…SamplingFromProbKernel / …FromLogitsKernel)",
        "kernel", False),
    "cpu-mrv2-gumbel": FusedSampler(
        f"vLLM CPU's Model Runner V2 draws its noise inside its fused op ({CPU_MRV2_GUMBEL})", "op", False),
    "cpu-fused-gumbel": FusedSampler(
        f"vLLM CPU's V1 runner draws its noise inside its fused op ({CPU_FUSED_GUMBEL})", "op", True),
    "ascend-v2-categorical": FusedSampler(
        "vllm-ascend's Model Runner V2 samples with categorical_sample (_categorical_prepare_mass_kernel, "
        "_categorical_sample_kernel): one uniform per row, no noise over the vocabulary",
        "kernel", False, noise=False,
        instead="vllm-ascend's default Model Runner V1 (VLLM_USE_V2_MODEL_RUNNER unset) draws the exponential noise "
                "in random_sample and is where the overlay runs: measure the saving there"),
}
#: Ascend composite exponential (op tokens in launch order on one stream): op-plugin's float
#: exponential_, and the same without the comparison kernel (vllm-ascend #13394's list).
ASCEND_CHAIN = ("DSARandomUniform", "Neg", "Add", "GreaterEqual", "MaskedFill", "Log", "Mul")
ASCEND_CHAINS = (ASCEND_CHAIN, tuple(op for op in ASCEND_CHAIN if op != "GreaterEqual"))

#: Everything the default rules look for, for the "nothing found" message.
LOOKED_FOR = (
    f"{SPAN_EXPONENTIAL} (overlay span)",
    "overlay event-log exponential windows",
    "*exponential_kernel* (CUDA/ROCm distribution_elementwise kernel)",
    "aclnnExponential / aclnnSimThreadExponential / Exponential (Ascend)",
    "DSARandomUniform→Neg→Add→[GreaterEqual→]MaskedFill→Log→Mul on one stream (Ascend composite exponential)",
    "_gumbel_sample_kernel (vLLM / vllm-ascend Model Runner V2 fused Gumbel-max, noise + argmax)",
    "*SamplingFromLogitsKernel / *SamplingFromProbKernel (FlashInfer sampling, noise inside)",
    "_categorical_prepare_mass_kernel / _categorical_sample_kernel (vllm-ascend Model Runner V2 categorical "
    "sampling, one uniform per row)",
    f"{CPU_OP_NAME} (CPU)",
    f"{CPU_FUSED_GUMBEL} (vLLM CPU fused Gumbel-max, noise + argmax)",
    f"{CPU_MRV2_GUMBEL} (vLLM CPU Model Runner V2 fused Gumbel-max, noise + argmax)",
)
_SIMILAR_RE = re.compile(r"random|uniform|exponential|rand|gumbel|sampl", re.IGNORECASE)

_DEVICE_KINDS = (Kind.KERNEL, Kind.COMM, Kind.MEMCPY, Kind.ANNOTATION)


@dataclass
class Instances:
    """Target instances of one Timeline, column-wise.

    Instance ``i`` has ``lane[i]``, ``name[i]`` (index into the Timeline's
    names), ``start[i]``/``end[i]`` (ns, the span of its members) and members
    ``member_start/member_end`` where ``member_inst == i`` (disjoint, sorted).
    ``events`` holds the Timeline row of every member; ``matched`` every row
    the rule matched (members plus nested duplicates), excluded from busy time.
    """

    rule: str  # which rule matched: "op", "overlay-span", "overlay-log", "device-kernel", "ascend-chain",
    # "mrv2-fused-gumbel", "flashinfer-sampling", "ascend-v2-categorical", "host-span", "cpu-op", "cpu-fused-gumbel",
    # "cpu-mrv2-gumbel"
    lane: np.ndarray
    name: np.ndarray
    start: np.ndarray
    end: np.ndarray
    member_inst: np.ndarray
    member_start: np.ndarray
    member_end: np.ndarray
    events: np.ndarray
    rules: list[str] = field(default_factory=list)  # rule per instance when several apply (chain + kernel)
    #: Every Timeline row the rule matched, nested duplicates included: never busy time.
    matched: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def __len__(self) -> int:
        return len(self.lane)

    @property
    def total(self) -> np.ndarray:
        """Busy time of each instance: the sum of its (disjoint) members (ns)."""
        out = np.zeros(len(self), dtype=np.int64)
        np.add.at(out, self.member_inst, self.member_end - self.member_start)
        return out


def _empty(rule: str) -> Instances:
    z = np.empty(0, np.int64)
    return Instances(rule, z.astype(np.int32), z.astype(np.int32), z, z, z, z, z, z)


def kind_mask(tl: Timeline, kinds: tuple[Kind, ...]) -> np.ndarray:
    """Rows whose :class:`Kind` is one of ``kinds`` (:func:`codes_mask` through a table of the kinds)."""
    table = np.zeros(max(Kind) + 1, dtype=bool)
    table[[int(k) for k in kinds]] = True
    return codes_mask(tl.kind, table)


def lane_kind_mask(tl: Timeline, kinds: tuple[LaneKind, ...]) -> np.ndarray:
    """Rows whose lane is of one of ``kinds`` (a new array: the caller may change it)."""
    if len(tl) == 0 or len(tl.lanes) == 0:
        return np.zeros(len(tl), dtype=bool)
    return _lane_masks(tl, frozenset(int(k) for k in kinds)).copy()


#: The last Timeline's lane-kind masks: the analysis of one Timeline asks for the same few masks a score of
#: times, and each is a gather over every event (a copy is twenty times cheaper).
_MASKS: tuple[Callable[[], Timeline | None], np.ndarray, dict[frozenset[int], np.ndarray]] | None = None


def _lane_masks(tl: Timeline, want: frozenset[int]) -> np.ndarray:
    global _MASKS
    if _MASKS is None or _MASKS[0]() is not tl or _MASKS[1] is not tl.lane:
        _MASKS = (weakref.ref(tl), tl.lane, {})
    masks = _MASKS[2]
    if want not in masks:
        hit = np.array([int(ln.kind) in want for ln in tl.lanes], dtype=bool)
        masks[want] = codes_mask(tl.lane, hit)  # the lane's answer, decided once per lane
    return masks[want]


def name_mask(tl: Timeline, pred) -> np.ndarray:
    """Rows whose (interned) name satisfies ``pred`` — evaluated once per distinct name."""
    hit = np.fromiter((bool(pred(n)) for n in tl.names), dtype=bool, count=len(tl.names))
    if len(tl) == 0 or len(hit) == 0:
        return np.zeros(len(tl), dtype=bool)
    return codes_mask(tl.name, hit)


#: Up to this many marked codes, :func:`codes_mask` compares instead of gathering.
_FEW_CODES = 4


def codes_mask(codes: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """``hit[codes]``: the rows whose code (an index into ``hit``, as a Timeline's lane, name and kind columns
    are) is marked. A target's masks mark a code or a few, and comparing a column with one code is twenty
    times cheaper than a gather per row (issue 41: a score of masks over every event of a rank), so a few
    marked codes are compared, no marked code is no row, and only many are gathered (``np.take``)."""
    marked = np.flatnonzero(hit)
    if len(marked) == 0:
        return np.zeros(len(codes), dtype=bool)
    if len(marked) <= _FEW_CODES:
        out = codes == marked[0]
        for k in marked[1:].tolist():
            out |= codes == k
        return out
    return np.take(hit, codes)


def _from_rows(tl: Timeline, rows: np.ndarray, rule: str) -> Instances:
    """One instance per row, dropping rows nested inside another match on the same lane."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return _empty(rule)
    matched = rows.copy()
    start = tl.start[rows]
    end = start + tl.dur[rows]
    lane = tl.lane[rows]
    # Sort by lane, start, longest first: a row nested in an earlier one on the
    # same lane (aten::exponential_ inside an expo_prof::exponential span of
    # the same name set, a re-entrant op) is the same draw, counted once.
    order = np.lexsort((-end, start, lane))
    rows, start, end, lane = rows[order], start[order], end[order], lane[order]
    keep = np.ones(len(rows), dtype=bool)
    cuts = np.flatnonzero(lane[1:] != lane[:-1]) + 1
    for seg in np.split(np.arange(len(rows)), cuts):  # one pass per lane (few lanes)
        e = end[seg]
        reach = np.maximum.accumulate(e)
        keep[seg[1:]] = e[1:] > reach[:-1]
    rows, start, end, lane = rows[keep], start[keep], end[keep], lane[keep]
    # Partially overlapping matches on one lane: clip the later one's start so
    # members stay disjoint (never counts the same nanosecond twice).
    mstart = start.copy()
    same = np.zeros(len(rows), dtype=bool)
    same[1:] = lane[1:] == lane[:-1]
    prev_end = np.concatenate(([np.iinfo(np.int64).min], end[:-1]))
    mstart = np.where(same, np.maximum(mstart, prev_end), mstart)
    mstart = np.minimum(mstart, end)
    n = len(rows)
    return Instances(
        rule=rule,
        lane=lane.astype(np.int32),
        name=tl.name[rows].astype(np.int32),
        start=start,
        end=end,
        member_inst=np.arange(n, dtype=np.int64),
        member_start=mstart,
        member_end=end,
        events=rows,
        rules=[rule] * n,
        matched=matched,
    )


def _tokens(name: str) -> set[str]:
    return set(t for t in re.split(r"[_/\s.:]+", name) if t)


def _ascend_chains(tl: Timeline) -> list[list[int]]:
    """Rows of each composite exponential chain found on a device stream (any of :data:`ASCEND_CHAINS`)."""
    kern = np.flatnonzero((tl.kind == Kind.KERNEL) & lane_kind_mask(tl, (LaneKind.STREAM,)))
    if len(kern) == 0:
        return []
    # The op each distinct name can play (index into ASCEND_CHAIN, -1: none); checked once per name.
    op_of_name = np.full(len(tl.names), -1, dtype=np.int8)
    first_hits = False
    for i, nm in enumerate(tl.names):
        toks = _tokens(nm)
        for j, op in enumerate(ASCEND_CHAIN):
            if op in toks:
                op_of_name[i] = j
                first_hits |= j == 0
                break
    if not first_hits:
        return []
    chains: list[list[int]] = []
    order = kern[np.lexsort((tl.start[kern], tl.lane[kern]))]
    ops = op_of_name[tl.name[order]]
    lanes = tl.lane[order]
    patterns = [np.array([ASCEND_CHAIN.index(op) for op in chain], dtype=np.int8) for chain in ASCEND_CHAINS]
    for i in np.flatnonzero(ops == 0):
        for want in patterns:  # the longest first: a 7-kernel chain is never read as a 6-kernel one
            n = len(want)
            if i + n <= len(order) and lanes[i + n - 1] == lanes[i] and np.array_equal(ops[i : i + n], want):
                chains.append([int(r) for r in order[i : i + n]])
                break
    return chains


def _from_chains(tl: Timeline, chains: list[list[int]]) -> Instances:
    n = len(chains)
    rows = np.array([r for c in chains for r in c], dtype=np.int64)
    member_inst = np.repeat(np.arange(n, dtype=np.int64), [len(c) for c in chains])
    ms = tl.start[rows]
    me = ms + tl.dur[rows]
    # Members of one chain are sequential on one stream; clip jitter overlaps.
    prev_end = np.concatenate(([np.iinfo(np.int64).min], me[:-1]))
    same = np.concatenate(([False], member_inst[1:] == member_inst[:-1]))
    ms = np.minimum(np.where(same, np.maximum(ms, prev_end), ms), me)
    first = np.array([c[0] for c in chains], dtype=np.int64)
    start = np.array([tl.start[c].min() for c in chains], dtype=np.int64)
    end = np.array([(tl.start[c] + tl.dur[c]).max() for c in chains], dtype=np.int64)
    return Instances(
        rule="ascend-chain",
        lane=tl.lane[first].astype(np.int32),
        name=tl.name[first].astype(np.int32),
        start=start,
        end=end,
        member_inst=member_inst,
        member_start=ms,
        member_end=me,
        events=rows,
        rules=["ascend-chain"] * n,
        matched=rows.copy(),
    )


def _concat(a: Instances, b: Instances) -> Instances:
    if len(a) == 0:
        return b
    if len(b) == 0:
        return a
    return Instances(
        rule=f"{a.rule}+{b.rule}",
        lane=np.concatenate((a.lane, b.lane)),
        name=np.concatenate((a.name, b.name)),
        start=np.concatenate((a.start, b.start)),
        end=np.concatenate((a.end, b.end)),
        member_inst=np.concatenate((a.member_inst, b.member_inst + len(a))),
        member_start=np.concatenate((a.member_start, b.member_start)),
        member_end=np.concatenate((a.member_end, b.member_end)),
        events=np.concatenate((a.events, b.events)),
        rules=a.rules + b.rules,
        matched=np.concatenate((a.matched, b.matched)),
    )


def has_device_kernels(tl: Timeline) -> bool:
    """Whether any compute kernel ran on a device stream in this Timeline."""
    return bool(((tl.kind == Kind.KERNEL) & lane_kind_mask(tl, (LaneKind.STREAM,))).any())


def find_instances(tl: Timeline, op: re.Pattern | None = None) -> Instances:
    """Target instances of one Timeline (see the module docstring for the rules)."""
    not_step = tl.kind != Kind.STEP
    if op is not None:
        hit = name_mask(tl, op.search) & not_step
        work = kind_mask(tl, (Kind.KERNEL, Kind.COMM, Kind.MEMCPY))
        # Device work first (not the gpu_user_annotation copies of host spans
        # around it), then device annotations, the overlay log, host threads.
        for lanes, extra in (
            ((LaneKind.STREAM,), work),
            ((LaneKind.LOGICAL,), None),  # Ascend HCCL op-level spans
            ((LaneKind.STREAM,), None),
            ((LaneKind.OVERLAY,), None),
            ((LaneKind.THREAD,), None),
        ):
            m = hit & lane_kind_mask(tl, lanes)
            if extra is not None:
                m &= extra
            rows = np.flatnonzero(m)
            if len(rows):
                return _from_rows(tl, rows, "op")
        return _empty("op")

    on_stream = lane_kind_mask(tl, (LaneKind.STREAM,))
    # 2. overlay spans on a device stream, or the overlay log's windows.
    span = name_mask(tl, lambda n: n == SPAN_EXPONENTIAL)
    rows = np.flatnonzero(span & on_stream & (tl.kind == Kind.ANNOTATION))
    if len(rows):
        return _from_rows(tl, rows, "overlay-span")
    on_overlay = lane_kind_mask(tl, (LaneKind.OVERLAY,))
    rows = np.flatnonzero(on_overlay & (tl.kind == Kind.OVERLAY) & name_mask(tl, _is_overlay_exponential))
    if len(rows):
        return _from_rows(tl, rows, "overlay-log")
    # 3. device kernels (any backend's names: the backend label may be a guess).
    device = has_device_kernels(tl)
    if device:
        chains = _ascend_chains(tl)
        chained = np.zeros(len(tl), dtype=bool)
        if chains:
            chained[[r for c in chains for r in c]] = True
        kern = (tl.kind == Kind.KERNEL) & on_stream & ~chained
        rows = np.flatnonzero(kern & name_mask(tl, lambda n: bool(CUDA_KERNEL_RE.search(n) or ASCEND_KERNEL_RE.search(n))))
        inst = _from_rows(tl, rows, "device-kernel")
        if chains:
            inst = _concat(inst, _from_chains(tl, chains))
        if len(inst):
            return inst
        # 3b. noise drawn inside the sampling kernel: whole kernel, an upper bound (vllm-ascend's categorical
        # kernels: the sampling cost). MRV2 samples some batches through FlashInfer and the rest through its own
        # kernel: each one found is a draw.
        for rule, pat in FUSED_DEVICE_RULES:
            rows = np.flatnonzero(kern & name_mask(tl, lambda n, pat=pat: bool(pat.search(n))))
            inst = _concat(inst, _from_rows(tl, rows, rule))
        return inst if len(inst) else _empty("device-kernel")
    # 4. CPU runs.
    on_thread = lane_kind_mask(tl, (LaneKind.THREAD,))
    rows = np.flatnonzero(span & on_thread & not_step)
    if len(rows):
        return _from_rows(tl, rows, "host-span")
    rows = np.flatnonzero(on_thread & (tl.kind == Kind.CPU_OP) & name_mask(tl, lambda n: n == CPU_OP_NAME))
    if len(rows):
        return _from_rows(tl, rows, "cpu-op")
    rows = np.flatnonzero(on_thread & (tl.kind == Kind.CPU_OP) & name_mask(tl, lambda n: n == CPU_FUSED_GUMBEL))
    if len(rows):
        return _from_rows(tl, rows, "cpu-fused-gumbel")
    rows = np.flatnonzero(on_thread & (tl.kind == Kind.CPU_OP) & name_mask(tl, lambda n: n == CPU_MRV2_GUMBEL))
    return _from_rows(tl, rows, "cpu-mrv2-gumbel")


def _is_overlay_exponential(name: str) -> bool:
    return name == SPAN_EXPONENTIAL or name in ("exponential", "exp", "overlay exponential")


def is_overlay_forward(name: str) -> bool:
    """Names of forward windows (overlay span, overlay log)."""
    return name == SPAN_FORWARD or name in ("forward", "fwd", "overlay forward")


def is_overlay_wait(name: str) -> bool:
    """Names of the sampler's wait windows (overlay span, overlay log)."""
    return name == SPAN_WAIT or name in ("wait", "overlay wait")


def similar_names(timelines: list[Timeline], op: re.Pattern | None = None, limit: int = 12) -> list[str]:
    """Names present in the traces that resemble what was looked for, most frequent first.

    Without ``--op``: names mentioning random / uniform / exponential / rand /
    gumbel / sampl. With ``--op``: names the pattern matches ignoring case,
    names containing the pattern's text, and close spellings (difflib).
    """
    counts: dict[str, int] = {}
    for tl in timelines:
        if event_count(tl) == 0 or len(tl.names) == 0:
            continue
        present = name_counts(tl)
        for i, nm in enumerate(tl.names):
            if present[i]:
                counts[nm] = counts.get(nm, 0) + int(present[i])
    if op is None:
        pool = [nm for nm in counts if _SIMILAR_RE.search(nm)]
        score = {nm: 0 for nm in pool}
    else:
        try:
            loose = re.compile(op.pattern, op.flags | re.IGNORECASE)
        except re.error:  # pragma: no cover - the pattern compiled once already
            loose = op
        # The pattern's literal words ("uniform_kernel" -> uniform, kernel): names sharing more words rank first.
        words = [w.lower() for w in re.findall(r"[A-Za-z0-9]{4,}", op.pattern)]
        score = {}
        for nm in counts:
            low = nm.lower()
            hits = sum(w in low for w in words) + (2 if loose.search(nm) else 0)
            if hits:
                score[nm] = hits
        for nm in difflib.get_close_matches(op.pattern, list(counts), n=limit, cutoff=0.6):
            score.setdefault(nm, 1)
        pool = list(score)
    ranked = sorted(pool, key=lambda n: (-score[n], -counts[n], n))
    return ranked[:limit]

"""An unpatched vllm-ascend's own side-stream draws in a torch_npu trace: one instance per draw.

vllm-ascend's ``random_sample`` (#4908, still in its main) draws ``q.exponential_()`` on a global
side stream and joins with ``wait_stream``. On every SoC before Ascend950, op-plugin's
``op_api::exponential_`` (op_plugin/ops/opapi/ExponentialKernelNpuOpApi.cpp) runs it as
``uniform_ → neg_ → add_(1) → (self >= 1-eps) → masked_fill_ → log_ → mul_``; vllm-ascend #13394
lists ``uniform_ → neg_ → add_(1) → masked_fill_ → log_ → mul_(-1)``. The kernel names below are
torch_npu's ``aclnn<Api>_<Kernel>_<OpType>`` names of those ops (as in the real
msinsight/msprof-analyze traces of ../shared/realtraces: ``aclnnMuls_MulAiCore_Mul``,
``aclnnAdds_AddAiCore_Add``, ``aclnnInplaceUniform_DSARandomUniform_DSARandomUniform``).

No trace of such a run is public: the test input is GENERATED — a FAKE side stream of such draws
written into the real msinsight torch_npu ``trace_view.json`` (its own processes, streams, events
and string timestamps kept as they are), then read by expo-prof as any torch_npu output.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

import expo_prof
from analysis_helpers import REALTRACES, require  # type: ignore[import-not-found]

REAL = "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
#: op-plugin's float exponential_ kernels (op type last), in launch order.
OP_PLUGIN_CHAIN = [
    ("aclnnInplaceUniform_DSARandomUniform_DSARandomUniform", "DSA_SQE"),
    ("aclnnInplaceNeg_NegAiCore_Neg", "AI_VECTOR_CORE"),
    ("aclnnInplaceAdds_AddAiCore_Add", "AI_VECTOR_CORE"),
    ("aclnnGeScalar_GreaterEqualAiCore_GreaterEqual", "AI_VECTOR_CORE"),
    ("aclnnInplaceMaskedFillScalar_MaskedFillAiCore_MaskedFill", "AI_VECTOR_CORE"),
    ("aclnnInplaceLog_LogAiCore_Log", "AI_VECTOR_CORE"),
    ("aclnnInplaceMuls_MulAiCore_Mul", "AI_VECTOR_CORE"),
]
#: The same without the comparison kernel (vllm-ascend #13394's list).
PR_13394_CHAIN = [k for k in OP_PLUGIN_CHAIN if "GreaterEqual" not in k[0]]
SIDE_TID = 17  # the FAKE side stream ("Stream 17"), absent from the real trace


def _with_side_stream_draws(real: list, draws: list[list[tuple[str, str]]]) -> tuple[list, list[tuple[Decimal, Decimal, int]]]:
    """The real events plus ``draws`` on a new stream of the Ascend Hardware process; returns (events, spans)."""
    hw = next(e for e in real if e.get("ph") == "M" and e["name"] == "process_name"
              and e["args"].get("name") == "Ascend Hardware")
    pid = hw["pid"]
    compute = sorted(Decimal(e["ts"]) for e in real if e.get("pid") == pid and e.get("tid") == 2 and e.get("ph") == "X")
    events = list(real) + [
        {"name": "thread_name", "pid": pid, "tid": SIDE_TID, "args": {"name": f"Stream {SIDE_TID}"}, "ph": "M"},
        {"name": "thread_sort_index", "pid": pid, "tid": SIDE_TID, "args": {"sort_index": SIDE_TID}, "ph": "M"},
    ]
    spans = []
    task = 90000
    for d, chain in enumerate(draws):
        t = compute[len(compute) * (d + 1) // (len(draws) + 1)]  # somewhere inside the compute stream's work
        # what wait_stream puts on the side stream first (an event wait task: no kernel)
        events.append({"name": "EVENT_WAIT", "pid": pid, "tid": SIDE_TID, "ts": f"{t - Decimal('2.5'):.3f}", "dur": 0.5,
                       "args": {"Task Type": "EVENT_WAIT_SQE", "Physic Stream Id": SIDE_TID, "Task Id": task}, "ph": "X"})
        start = t
        for name, task_type in chain:
            task += 1
            events.append({"name": name, "pid": pid, "tid": SIDE_TID, "ts": f"{t:.3f}", "dur": 4.25,
                           "args": {"Model Id": 4294967295, "Task Type": task_type, "Physic Stream Id": SIDE_TID,
                                    "Task Id": task, "Batch Id": 0, "Subtask Id": 4294967295}, "ph": "X"})
            t += Decimal("5")
        spans.append((start, t - Decimal("0.75"), len(chain)))
    return events, spans


def analyze_torch_npu(tmp_path, events: list):
    """``events`` written as a torch_npu ``ASCEND_PROFILER_OUTPUT/trace_view.json`` under ``tmp_path``, analysed."""
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "trace_view.json").write_text(json.dumps(events))
    return expo_prof.analyze(str(tmp_path))


def test_each_side_stream_draw_of_an_unpatched_vllm_ascend_is_one_instance(tmp_path):
    # GIVEN the real msinsight torch_npu trace_view.json with three GENERATED draws on a side stream:
    # #13394's six kernels, op-plugin's seven, and six again
    require((REALTRACES / REAL).is_file(), f"real trace {REAL}")
    real = json.loads((REALTRACES / REAL).read_text())
    events, spans = _with_side_stream_draws(real, [PR_13394_CHAIN, OP_PLUGIN_CHAIN, PR_13394_CHAIN])
    # WHEN expo-prof analyses it
    res = analyze_torch_npu(tmp_path, events)
    # THEN each draw is ONE instance under the named rule, from its uniform kernel's start to its
    # last Mul's end, its busy time the sum of its six or seven kernels
    assert [r.rule for r in res.document.ranks] == ["ascend-chain"]
    inst = res.instances()
    assert len(inst["name"]) == 3 and set(inst["name"]) == {OP_PLUGIN_CHAIN[0][0]}
    starts = sorted(int(s) for s in inst["start_ns"])
    origin = min(starts)
    assert [s - origin for s in starts] == [int((a - spans[0][0]) * 1000) for a, _, _ in spans]
    assert sorted(inst["total_ns"].tolist()) == sorted(n * 4250 for _, _, n in spans)
    assert res.document.summary.instances == 3
    assert res.document.summary.hidden_ns + res.document.summary.exposed_ns == res.document.summary.total_ns


def test_the_real_trace_alone_has_no_draw():
    # GIVEN the real msinsight trace (CNN training: dropout's DSAGenBitMask, Muls, Adds; no exponential)
    require((REALTRACES / REAL).is_file(), f"real trace {REAL}")
    # WHEN analysed THEN nothing is taken for a draw (the instances above are the generated ones)
    with pytest.raises(expo_prof.errors.NothingFound):
        expo_prof.analyze(str(REALTRACES / REAL))

"""PyTorch profiler (Kineto) Chrome-trace JSON on the real files in ../shared/realtraces.

Every expectation is recomputed from the file itself with the stdlib
(json + Decimal), independently of the reader's msgspec/numpy path.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

import numpy as np
import pytest

from expo_prof.readers import load
from expo_prof.timeline import Kind, LaneKind
from readers_helpers import plain_json, us_to_ns

KINETO_FILES = [
    "hta/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "hta/tests/data/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    "hta/tests/data/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
    "hta/tests/data/df_index_resolver/df_index_resolver.json.gz",
    "hta/tests/data/execution_trace/benchmark_simple_add_trace.json.gz",
    "hta/tests/data/nccl_parser_config/nccl_data.json.gz",
    "hta/tests/data/negative_queue_length_values_check/rank0.json.gz",
    "hta/tests/data/timeline_analysis/sampled_rank-0.json.gz",
    "hta/tests/data/trace_compare/base/base.json.gz",
    "hta/tests/data/trace_diff/control/control.json.gz",
    "hta/tests/data/trace_file_list/inference_rank_1.json.gz",
    "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "tracelens/tests/traces/b200/eager_trace.json.gz",
    "tracelens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
    "tracelens/tests/traces/inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz",
    "tracelens/tests/traces/inference/vllm_decode_full/graph_execution.json.gz",
    "tracelens/tests/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz",
    "tracelens/tests/traces/torch_compile_triton/trace.json.gz",
    "vllm-cpu/rank0-default-with-stack.pt.trace.json.gz",
    "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz",
]

KERNEL_CATS = {"kernel", "Kernel"}
CPU_CATS = {"cpu_op", "Operator"}
RUNTIME_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
#: Complete-event categories the Kineto reader drops (Python frames, the whole-trace span, overhead).
DROPPED_CATS = {"python_function", "Trace", "overhead", "cpu_instant_event", "Python", "python"}


def _stream_id(tid) -> int:
    return int(str(tid).replace("stream", "").strip())


@pytest.fixture(scope="module", params=KINETO_FILES)
def kineto_read(rt, request):
    """GIVEN a real Kineto trace: (its plain json reading, what ``load`` gives for it).

    Module-scoped and parametrized, so pytest runs both per-file tests below on one reading of each file
    (each is parsed twice, by the stdlib and by the reader, once per module instead of once per test)."""
    path = rt / request.param
    return plain_json(path), load([path])


def test_kineto_kernels_per_stream_and_exact_times(kineto_read):
    """GIVEN a real Kineto trace
    WHEN it is loaded
    THEN each (device, stream) lane holds exactly the kernels a plain json count finds there,
    with start/duration equal to base + ts and dur converted exactly (Decimal) to ns,
    and host ops / runtime calls / flows / ProfilerSteps are all kept while python_function is dropped."""
    doc, res = kineto_read
    events = doc["traceEvents"]
    base = int(doc.get("baseTimeNanoseconds") or 0)

    assert len(res.timelines) == 1
    tl = res.timelines[0]

    # Kernels per stream (KERNEL or COMM: collectives are kernels too).
    ref = Counter((e["pid"], _stream_id(e["tid"])) for e in events if e.get("ph") == "X" and e.get("cat") in KERNEL_CATS)
    is_k = np.isin(tl.kind, (Kind.KERNEL, Kind.COMM))
    got = Counter((tl.lanes[i].pid, tl.lanes[i].tid) for i in tl.lane[is_k])
    assert got == ref
    assert all(tl.lanes[i].kind == LaneKind.STREAM for i in set(tl.lane[is_k].tolist()))

    # Exact ns for every kernel (sorted multiset comparison).
    ref_t = sorted(
        (base + us_to_ns(e["ts"]), us_to_ns(e.get("dur", 0)))
        for e in events
        if e.get("ph") == "X" and e.get("cat") in KERNEL_CATS
    )
    got_t = sorted(zip(tl.start[is_k].tolist(), tl.dur[is_k].tolist()))
    assert got_t == ref_t

    # Host operators and runtime calls.
    n_cpu = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in CPU_CATS and not str(e["name"]).startswith("ProfilerStep#"))
    assert int((tl.kind == Kind.CPU_OP).sum()) == n_cpu
    n_rt = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS)
    assert int((tl.kind == Kind.RUNTIME).sum()) == n_rt

    # ProfilerStep#N -> Kind.STEP with step id N.
    ref_steps = sorted(
        int(e["name"].split("#")[1])
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
        and e.get("cat") in ("user_annotation", "gpu_user_annotation", "cpu_op", "Operator")
    )
    assert sorted(tl.step[tl.kind == Kind.STEP].tolist()) == ref_steps

    # Flow events kept in a side table, one row per s/f/t event.
    n_flow = sum(1 for e in events if e.get("ph") in ("s", "f", "t"))
    flows = tl.meta["flows"]
    assert len(flows["id"]) == n_flow == len(flows["ts"]) == len(flows["lane"])
    # python_function is dropped early and counted.
    n_py = sum(1 for e in events if e.get("cat") == "python_function")
    assert tl.meta["dropped_events"].get("python_function", 0) == n_py
    assert not any(tl.names[i].startswith("<built-in") for i in np.unique(tl.name))  # typical Python frame names

    # Rank from distributedInfo when present.
    di = doc.get("distributedInfo") or {}
    if "rank" in di:
        assert tl.rank == di["rank"]
    # Columns are sorted by start and well-typed.
    assert tl.start.dtype == np.int64 and tl.dur.dtype == np.int64
    assert np.all(np.diff(tl.start) >= 0)
    assert (tl.dur >= 0).all()


def test_kineto_backend_detection(rt):
    """GIVEN CUDA, ROCm and CPU-only real traces WHEN loaded THEN backend is cuda / rocm / cpu."""
    cases = {
        "hta/tests/data/nccl_parser_config/nccl_data.json.gz": "cuda",
        "hta/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": "rocm",
        "tracelens/tests/traces/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz": "rocm",
        "hta/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz": "cpu",
        "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz": "cpu",
    }
    for rel, backend in cases.items():
        assert load([rt / rel]).timelines[0].backend == backend, rel


def test_kineto_nccl_kernels_are_communication(rt):
    """GIVEN the HTA NCCL trace WHEN loaded THEN exactly the nccl* kernels are Kind.COMM; they run on their own stream 40."""
    path = rt / "hta/tests/data/nccl_parser_config/nccl_data.json.gz"
    events = plain_json(path)["traceEvents"]
    ref = Counter(_stream_id(e["tid"]) for e in events if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
    tl = load([path]).timelines[0]
    got = Counter(tl.lanes[i].tid for i in tl.lane[tl.kind == Kind.COMM])
    assert got == ref and set(ref) == {40}  # compute kernels stay on stream 7


def test_kineto_old_category_names(rt):
    """GIVEN the PyTorch 1.9 trace (Kernel / Memcpy / Memset / Runtime / Operator, tid "stream 7")
    WHEN loaded THEN its memcpys and memsets are Kind.MEMCPY on stream 7 and its flows ('async') are kept."""
    path = rt / "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    events = plain_json(path)["traceEvents"]
    n_copy = sum(1 for e in events if e.get("cat") in ("Memcpy", "Memset"))
    tl = load([path]).timelines[0]
    assert int((tl.kind == Kind.MEMCPY).sum()) == n_copy
    assert {tl.lanes[i].name for i in tl.lane[tl.kind == Kind.MEMCPY]} == {"stream 7"}
    assert tl.meta["flows"]["cats"] and "async" in tl.meta["flows"]["cats"]


def test_kineto_correlation_links_runtime_to_kernel(rt):
    """GIVEN a CUDA trace WHEN loaded THEN meta['correlation'] is aligned with the events and every kernel's
    correlation id is also carried by exactly one runtime call (the launch), as in the file."""
    path = rt / "hta/tests/data/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"
    tl = load([path]).timelines[0]
    corr = tl.meta["correlation"]
    assert len(corr) == len(tl)
    k = corr[tl.kind == Kind.KERNEL]
    r = Counter(corr[tl.kind == Kind.RUNTIME].tolist())
    assert len(k) and all(r[c] == 1 for c in k.tolist())


def test_kineto_correlation_column_is_the_files_args_correlation(kineto_read):
    """GIVEN a real Kineto trace
    WHEN it is loaded (the reader skips args.correlation for categories that never carry it)
    THEN every kept event's correlation is its own args.correlation in the file (-1 where it has none):
    the (name, start, correlation) multiset equals a plain json reading of the file."""
    doc, res = kineto_read
    base = doc.get("baseTimeNanoseconds") or 0
    tl = res.timelines[0]
    corr = tl.meta["correlation"]

    def corr_of(e) -> int:
        c = (e.get("args") or {}).get("correlation")
        return c if isinstance(c, int) and not isinstance(c, bool) else -1

    kept_names = set(tl.names)
    want = Counter(
        (e["name"], base + us_to_ns(e["ts"]), corr_of(e))
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and e.get("name") in kept_names and e.get("cat") not in DROPPED_CATS and "dur" in e
    )
    got = Counter(zip((tl.names[i] for i in tl.name.tolist()), tl.start.tolist(), corr.tolist()))
    assert got == want


def test_relative_timestamps_add_base_time(rt):
    """GIVEN a trace with baseTimeNanoseconds WHEN loaded THEN starts are epoch ns (base + ts), i.e. in the year of the file."""
    path = rt / "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"
    doc = plain_json(path)
    tl = load([path]).timelines[0]
    assert tl.meta["base_time_ns"] == doc["baseTimeNanoseconds"]
    first = min(Decimal(e["ts"]) for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    assert tl.start[tl.kind == Kind.CPU_OP].min() == doc["baseTimeNanoseconds"] + us_to_ns(first)


def test_relative_timestamps_beyond_float_precision_are_read_from_the_text(rt, tmp_path):
    """GIVEN a real relative-time trace whose ts are shifted past 2**43 µs (a host up for >102 days), where two
    3-decimal values can share one float64
    WHEN loaded THEN every event still starts at exactly base + ts (the batch is re-read from the number text)."""
    import gzip
    import re

    src = rt / "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"
    raw = gzip.decompress(src.read_bytes()).decode()
    shift = Decimal("4000000000000.000")  # 4e12 µs: 5.1e12 -> 9.1e12 µs > 2**43 = 8.796e12

    def bump(m):
        return f'"ts": {Decimal(m.group(1)) + shift}'

    text = re.sub(r'"ts": (\d+\.\d+)', bump, raw)
    p = tmp_path / "long-uptime.pt.trace.json"
    p.write_text(text)
    doc = plain_json(p)
    base = doc["baseTimeNanoseconds"]
    ops = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    assert min(Decimal(e["ts"]) for e in ops) > 2**43
    exact = sorted(base + us_to_ns(e["ts"]) for e in ops)
    assert any(round(float(e["ts"]) * 1000) != us_to_ns(e["ts"]) for e in ops)  # a float64 would be off
    tl = load([p]).timelines[0]
    assert sorted(tl.start[tl.kind == Kind.CPU_OP].tolist()) == exact

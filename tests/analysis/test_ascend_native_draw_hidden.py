"""An unpatched vllm-ascend's native side-stream draw: hidden where the compute stream is busy, exposed where not.

vllm-ascend's ``random_sample`` (vllm_ascend/sample/sampler.py, v0.25.1rc1 and main:
``with npu_stream_switch(global_stream()): q.exponential_()`` then
``torch.npu.current_stream().wait_stream(global_stream())``) is the ``native`` arm of a three-arm
switchback (docs/overlay.md). Read without any overlay, each such draw is one ``ascend-chain``
instance on its side stream (test_ascend_side_stream_draws.py); this test checks what ``analyze``
says of its time.

The input is GENERATED: two FAKE draws (op-plugin's seven ``exponential_`` kernels, torch_npu's real
kernel names) on a new stream of the real msinsight torch_npu ``trace_view.json`` — one placed
inside the trace's longest compute kernel (``aclnnForeachAddListV2_…``, 706 µs, AI_CORE on
stream 2), one after the trace's last event, where no stream is busy.
"""

from __future__ import annotations

import json
from decimal import Decimal

from analysis_helpers import REALTRACES, require  # type: ignore[import-not-found]
from test_ascend_side_stream_draws import OP_PLUGIN_CHAIN, REAL, analyze_torch_npu  # type: ignore[import-not-found]

STREAM = 23  # the FAKE side stream (global_stream()), absent from the real trace
KERNEL_US = Decimal("4.25")


def _draw(pid: int, at: Decimal, task: int) -> list[dict]:
    """One FAKE draw: the chain's kernels back to back (5 µs apart) on STREAM from ``at``."""
    return [{"name": name, "pid": pid, "tid": STREAM, "ts": f"{at + 5 * i:.3f}", "dur": float(KERNEL_US), "ph": "X",
             "args": {"Model Id": 4294967295, "Task Type": kind, "Physic Stream Id": STREAM, "Task Id": task + i,
                      "Batch Id": 0, "Subtask Id": 4294967295}}
            for i, (name, kind) in enumerate(OP_PLUGIN_CHAIN)]


def test_a_native_draw_under_compute_is_hidden_and_one_after_it_exposed(tmp_path):
    # GIVEN the real torch_npu trace plus two GENERATED native draws on a side stream: one inside the
    # longest compute kernel of stream 2, one after everything
    require((REALTRACES / REAL).is_file(), f"real trace {REAL}")
    real = json.loads((REALTRACES / REAL).read_text())
    hw = next(e for e in real if e.get("ph") == "M" and e["name"] == "process_name"
              and e["args"].get("name") == "Ascend Hardware")
    pid = hw["pid"]
    kernels = [e for e in real if e.get("pid") == pid and e.get("tid") == 2 and e.get("ph") == "X"
               and e["args"].get("Task Type") == "AI_CORE"]
    longest = max(kernels, key=lambda e: float(e["dur"]))
    assert float(longest["dur"]) > 100  # room for the 34 µs draw well inside it
    inside = Decimal(longest["ts"]) + 20
    last_end = max(Decimal(e["ts"]) + Decimal(str(e.get("dur", 0))) for e in real if e.get("ph") == "X")
    after = last_end + 1000
    events = real + [{"name": "thread_name", "pid": pid, "tid": STREAM, "args": {"name": f"Stream {STREAM}"},
                      "ph": "M"}] + _draw(pid, inside, 91000) + _draw(pid, after, 92000)
    # WHEN analysed, as any torch_npu output (no overlay log, no option)
    res = analyze_torch_npu(tmp_path, events)
    # THEN two instances under the ascend-chain rule, each busy for its seven kernels
    assert [r.rule for r in res.document.ranks] == ["ascend-chain"]
    inst = res.instances()
    busy = 7 * int(KERNEL_US * 1000)
    order = sorted(range(2), key=lambda i: int(inst["start_ns"][i]))
    assert [int(inst["total_ns"][i]) for i in order] == [busy, busy]
    # AND the draw under the compute kernel is all hidden, the one after everything all exposed
    assert [(int(inst["hidden_ns"][i]), int(inst["exposed_ns"][i])) for i in order] == [(busy, 0), (0, busy)]
    s = res.document.summary
    assert (s.hidden_ns, s.exposed_ns, s.total_ns) == (busy, busy, 2 * busy)

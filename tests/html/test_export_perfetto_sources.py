"""``expo-prof export --format perfetto`` keeps the sources' events the Timeline drops, and says what it leaves out.

Every expectation comes from a plain reading of the source (gzip + json, exact ns by Decimal:
:mod:`chrome_tally`), never from the code under test; the files are decoded and checked against Perfetto's
track-event rules with the helpers of test_export_perfetto.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import chrome_tally  # type: ignore[import-not-found]
import pytest
from export_helpers import export, two_ranks  # type: ignore[import-not-found]
from test_export_perfetto import check_rules, decode  # type: ignore[import-not-found]

#: Each test here costs seconds of a core (a sweep over real traces): make test-fast leaves the module to make test.
pytestmark = pytest.mark.slow

#: The category of the analysis's own slices (docs/export.md): not a source's.
ADDED = "expo_prof"
WITH_STACK = "vllm-cpu/rank0-default-with-stack.pt.trace.json.gz"
CASES = {
    "vllm-cpu-with-stack": (WITH_STACK, ()),
    "a100-nccl": ("hta/tests/data/nccl_parser_config/nccl_data.json.gz", ("--op", "nccl")),
    "ascend-trace-view": ("msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",
                          ("--op", "MaxPool")),
    "b200-vllm-eager": ("tracelens/tests/traces/b200/eager_trace.json.gz", ("--op", "allreduce|all_reduce|multimem")),
}


def source_slices(r: dict) -> Counter:
    """The file's slices that are a source's events (not the analysis tracks): (start, end, name)."""
    return Counter((s, e, n) for cat, v in r["by_cat"].items() if cat != ADDED for s, e, n, _ in v)


@pytest.fixture(scope="module")
def with_stack(realtraces, tmp_path_factory):
    """The real vLLM CPU trace recorded with stacks, exported once: (its events, base ns, summary, checked file)."""
    src = realtraces / WITH_STACK
    out, msg = export(tmp_path_factory.mktemp("stack"), str(src), "--format", "perfetto", name="stack.pftrace")
    events, base, _ = chrome_tally.load(src)
    return events, base, msg, check_rules(decode(out))


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_source_event_is_in_the_file_or_counted_left_out(case, realtraces, tmp_path, with_stack):
    """GIVEN a real trace: vLLM CPU with stacks (225,526 python_function of 240,698 events), the A100 NCCL
    trace (flows with one end), an Ascend trace_view (counters, device tasks without a category, the Python
    frames of torch_npu), vLLM eager on a B200 (python_function, overhead, cuda_driver)
    WHEN exported with --format perfetto
    THEN the file follows the track-event rules; every complete event of the source is a slice with its own
    name and exact start and end ns, every instant an instant at its exact ts; and the summary line's counts
    per category, in the file and left out, are those of a plain json reading of the source, and add up to
    all its events."""
    path, args = CASES[case]
    src = realtraces / path
    if path == WITH_STACK:
        events, base, msg, r = with_stack
    else:
        out, msg = export(tmp_path, str(src), *args, "--format", "perfetto", name="t.pftrace")
        events, base, _ = chrome_tally.load(src)
        r = check_rules(decode(out))
    assert source_slices(r) == chrome_tally.complete(events, base)
    assert Counter((ts, n) for ts, n, _, _ in r["instants"]) == Counter(
        (chrome_tally.ns(e["ts"]) + base, e.get("name", "")) for e in events if e.get("ph") in ("i", "I"))
    written, left = chrome_tally.summary(msg)
    assert (written, left) == chrome_tally.tally(events)
    assert sum(written.values()) + sum(left.values()) == len(events)


def test_python_frames_nest_around_the_ops_they_call(with_stack):
    """GIVEN the real vLLM CPU trace recorded with stacks WHEN exported with --format perfetto
    THEN the worker thread's python_function frames are on its track with its cpu_ops, each at its exact ns:
    every op on that track has an enclosing slice, the roots of the track are Python frames (the frames the
    process started from), and the 17 frames of tid 0 are on a track of their own named after the process."""
    events, base, _, r = with_stack
    worker = "thread 9169 (VLLM::Worker)"  # (the source's thread_name of pid 9169, tid 9169)
    frames = Counter((chrome_tally.ns(e["ts"]) + base, chrome_tally.ns(e["ts"]) + base + chrome_tally.ns(e["dur"]),
                      e["name"], e["tid"]) for e in events if e.get("cat") == "python_function")
    got = Counter((s, e, n, {worker: 9169, "VLLM::Worker · tid 0": 0}.get(tr, tr))
                  for s, e, n, tr in r["by_cat"]["python_function"])
    assert got == frames and sum(1 for *_, tid in frames.elements() if tid == 0) == 17
    cat = {(s, e, n): c for c, v in r["by_cat"].items() for s, e, n, tr in v if tr == worker}
    parent: Counter = Counter()
    stack: list[tuple] = []
    for s, e, n, _ in sorted(r["slices"][worker], key=lambda x: (x[0], -x[1])):
        while stack and stack[-1][1] <= s:
            stack.pop()
        parent[(cat[(s, e, n)], cat[stack[-1]] if stack else None)] += 1
        stack.append((s, e, n))
    assert parent[("cpu_op", None)] == 0 and parent[("cpu_op", "python_function")] > 0
    assert {c for c, p in parent if p is None} == {"python_function"}
    assert sum(v for (c, _), v in parent.items() if c == "cpu_op") == 15125


def test_two_ranks_each_hold_their_own_source_events(tmp_path, nccl_trace):
    """GIVEN two ranks of a real trace exported to JSON first (each rank's processes under its own pids, plus
    the export's analysis tracks), read back as one Timeline per rank
    WHEN that file is exported with --format perfetto
    THEN each rank's complete events are slices at their exact ns, the events of no rank (the earlier export's
    own analysis tracks) are counted as left out, and the summary's counts per category are those of a plain
    json reading of the file, per rank pid."""
    d = two_ranks(tmp_path, nccl_trace)
    first, _ = export(tmp_path, str(d), "--op", "nccl", name="two.json")
    out, msg = export(tmp_path, str(first), "--op", "nccl", "--format", "perfetto", name="two.pftrace")
    events, base, top = chrome_tally.load(first)
    rank_pids = {int(p) for p in top["expoProf"]["rank_pids"]}
    mine = [e for e in events if e.get("pid") in rank_pids]
    written, left = chrome_tally.tally(mine)
    left["of no rank"] = sum(1 for e in events if e.get("pid") not in rank_pids)
    assert left["of no rank"] > 0
    assert chrome_tally.summary(msg) == (written, +left)
    r = check_rules(decode(out))
    assert source_slices(r) == chrome_tally.complete(mine, base)


def test_a_source_cut_short_is_counted_from_what_the_reader_kept(tmp_path, vllm_cpu_trace):
    """GIVEN the real vLLM CPU trace cut in the middle of an event (as a killed profiler leaves it), which only
    the readers' repair can read
    WHEN exported with --format perfetto
    THEN a warning says only the events the timeline holds are in the file; those are the complete cpu_op /
    user_annotation events before the cut, at their exact ns, and the summary counts, in the file and left
    out, add up to the events before the cut."""
    raw = gzip.decompress(vllm_cpu_trace.read_bytes())
    cut = raw[: len(raw) // 2]
    cut_file = tmp_path / "cut.pt.trace.json"
    cut_file.write_bytes(cut)
    # The complete events before the cut, read one by one.
    text = cut.decode()
    pos = text.index("[", text.index('"traceEvents"')) + 1
    dec, events = json.JSONDecoder(parse_float=chrome_tally.Decimal), []
    while True:
        pos = re.compile(r"[\s,]*").match(text, pos).end()
        try:
            e, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        events.append(e)
    base = int(re.search(r'"baseTimeNanoseconds":\s*(\d+)', text).group(1))
    out, msg = export(tmp_path, str(cut_file), "--format", "perfetto", name="cut.pftrace")
    flat = " ".join(msg.split())
    assert "not plain valid JSON" in flat and "only the events the timeline holds are in the file" in flat
    kept = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    assert source_slices(check_rules(decode(out))) == chrome_tally.complete(kept, base)
    written, left = chrome_tally.summary(msg)
    assert sum(written.values()) == len(kept) and sum(written.values()) + sum(left.values()) == len(events)

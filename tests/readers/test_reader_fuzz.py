"""Fuzz pass over the readers: random truncations and byte mutations of small real files.

Every mutated file must give either Timelines (with consistent columns) or a one-line BadInput;
any other exception (reported by load() as an "internal error") fails the test.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expo_prof.errors import BadInput
from expo_prof.readers import load
from overlay.events import EventLog

_FUZZ = settings(
    max_examples=int(os.environ.get("EXPO_PROF_FUZZ_EXAMPLES", "120")), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)


def _overlay_log_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        log = EventLog(d)
        log.configure(backend="cuda", lane="stream", rank=1)
        for i in range(6):
            log.step({"step": i, "rank": 1, "rows": 8, "vocab": 32000, "dtype": "float32", "launched": i % 3 != 0,
                      "used": i % 3 != 0, "fallback": None if i % 3 else "all_greedy", "t0_ns": 10**9 + i * 10**6,
                      "fwd": [0, 900_000], "exp": [1000, 51000], "wait": [905_000, 905_100], "timing": "device"})
        log.notice("info", "test", "fuzz seed")
        log.close()
        return Path(log.path).read_bytes()


def _trace_view_prefix(rt: Path, n_events: int = 120) -> bytes:
    # A real torch_npu trace_view.json cut after n complete events and closed again.
    raw = (rt / "msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json").read_bytes()
    pos = 0
    for _ in range(n_events):
        pos = raw.index(b"}, {", pos + 1)
    return raw[: pos + 1] + b"]"


class _Seeds(dict):
    def __repr__(self) -> str:  # keep hypothesis' failure reports short
        return f"<{len(self)} real seed files>"


@pytest.fixture(scope="module")
def seeds(rt) -> dict[str, bytes]:
    """Small real inputs, one per reader (file name -> bytes)."""
    return _Seeds({
        "k.pt.trace.json": gzip.decompress((rt / "hta/tests/data/trace_compare/base/base.json.gz").read_bytes()),
        "old.pt.trace.json": gzip.decompress((rt / "hta/tests/data/trace_file_list/inference_rank_1.json.gz").read_bytes()),
        "k.pt.trace.json.gz": (rt / "hta/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz").read_bytes(),
        "trace_view.json": _trace_view_prefix(rt),
        "kernel_details.csv": (rt / "msinsight/server/src/test/test_data/test_rank_1/ASCEND_PROFILER_OUTPUT/kernel_details.csv").read_bytes(),
        "op_summary_1.csv": (rt / "msinsight/server/src/test/test_data/test_kernel_parse/op_summary_1.csv").read_bytes(),
        "expo-prof-events-h-1.jsonl": _overlay_log_bytes(),
        "msprof_0.db": (rt / "msinsight/server/src/test/test_data/full_db/msprof_0.db").read_bytes(),
    })


_mutation = st.one_of(
    st.tuples(st.just("trunc"), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 64)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.sampled_from([b"\xff", b"\x00", b'"', b"}", b"]", b",", b"\n",
                                                                     b"NaN", b"1e999", b"-", b"\t", b"\xc3"])),
)


def _mutate(data: bytes, muts) -> bytes:
    b = bytearray(data)
    for m in muts:
        pos = int(m[1] * len(b)) if b else 0
        if m[0] == "trunc":
            del b[pos:]
        elif m[0] == "flip" and b:
            b[min(pos, len(b) - 1)] = m[2]
        elif m[0] == "insert":
            b[pos:pos] = m[2]
        elif m[0] == "delete":
            del b[pos : pos + m[2]]
    return bytes(b)


def _check(path: Path) -> None:
    try:
        res = load([path])
    except BadInput as exc:
        msg = str(exc)
        assert "\n" not in msg and "internal error" not in msg, msg
        return
    assert not any("internal error" in why for _, why in res.skipped), res.skipped
    for tl in res.timelines:
        n = len(tl)
        assert n > 0
        for col in (tl.dur, tl.lane, tl.name, tl.kind):
            assert len(col) == n
        assert tl.start.dtype == np.int64 and (tl.dur >= 0).all()
        assert tl.lane.max() < len(tl.lanes) and tl.name.max() < len(tl.names)
        assert tl.step is None or len(tl.step) == n
    for w in res.warnings:
        assert "\n" not in w


@pytest.mark.parametrize(
    "name",
    ["k.pt.trace.json", "old.pt.trace.json", "k.pt.trace.json.gz", "trace_view.json", "kernel_details.csv",
     "op_summary_1.csv", "expo-prof-events-h-1.jsonl", "msprof_0.db"],
)
@_FUZZ
@given(muts=st.lists(_mutation, min_size=1, max_size=4))
def test_fuzzed_real_files_give_a_timeline_or_bad_input(seeds, name, muts):
    """GIVEN a small real file of each format with random truncations / byte edits
    WHEN loaded THEN the result is Timelines with consistent columns or a one-line BadInput."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(_mutate(seeds[name], muts))
        _check(p)


def test_fuzz_seeds_load_unmutated(seeds):
    """GIVEN the unmutated seeds WHEN loaded THEN each gives a Timeline (so the fuzz starts from valid inputs)."""
    with tempfile.TemporaryDirectory() as d:
        for name, data in seeds.items():
            p = Path(d) / name
            p.write_bytes(data)
            res = load([p])
            assert res.timelines and len(res.timelines[0]) > 0, name

"""The Chrome-trace reader's chunked, streaming decode on real files and on adversarial layouts.

The reader cuts the event array into chunks at ``}`` ``,`` ``{"`` matches
without parsing, accepts a chunk only when it decodes, and reads files through
a small reused window (expo_prof/readers/chrome/decode.py, stream.py).
Every expectation here comes from the stdlib (json + Decimal) or from the
reader's whole-file path, never from the streaming path itself.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expo_prof.errors import BadInput
from expo_prof.readers import load
from expo_prof.readers.chrome import decode, window
from expo_prof.readers.chrome.reader import read_chrome, read_chrome_file
from expo_prof.readers.file_bytes import read_bytes
from expo_prof.timeline import Kind
from readers_helpers import plain_json, us_to_ns

KINETO = [
    "hta/tests/data/nccl_parser_config/nccl_data.json.gz",  # flows, NCCL, ns-fraction floats
    "hta/tests/data/df_index_resolver/df_index_resolver.json.gz",  # integer µs, instants
    "tracelens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",  # deviceProperties after the events
    "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",  # PyTorch 1.9
    "vllm-cpu/rank0-default-with-stack.pt.trace.json.gz",  # 94 % python_function
]
NCCL_GZ = "hta/tests/data/nccl_parser_config/nccl_data.json.gz"
TRACE_VIEW = "msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Chunks of ~2 KB and a 3 KB window read 777 bytes at a time: every file crosses hundreds of boundaries,
    window refills and window growths (single events larger than the window)."""
    monkeypatch.setattr(decode, "CHUNK_BYTES", 2000)
    monkeypatch.setattr(window, "CAPACITY", 3000)
    monkeypatch.setattr(window, "PIECE", 777)


def _same(a, b) -> None:
    for col in ("start", "dur", "lane", "name", "kind", "step"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert a.names == b.names and a.lanes == b.lanes and a.warnings == b.warnings
    fa, fb = a.meta.get("flows"), b.meta.get("flows")
    assert (fa is None) == (fb is None)
    if fa is not None:
        for k in ("id", "phase", "cat", "ts", "lane"):
            assert np.array_equal(fa[k], fb[k]), k
    assert np.array_equal(a.meta.get("correlation", np.zeros(0)), b.meta.get("correlation", np.zeros(0)))


@pytest.mark.parametrize("rel", [*KINETO, TRACE_VIEW])
def test_streaming_in_tiny_chunks_equals_whole_file(rt, rel, tiny_chunks, monkeypatch):
    """GIVEN a real trace WHEN read through tiny chunks and a tiny window THEN the Timeline is identical to the
    one read with default chunks from the whole file in memory."""
    path = rt / rel
    small = read_chrome_file(path)
    monkeypatch.setattr(decode, "CHUNK_BYTES", 1 << 19)
    whole = read_chrome(read_bytes(path), path)
    _same(small, whole)


def _adversarial(rt) -> tuple[dict, bytes]:
    """A real Kineto trace re-serialised so that boundary-like text sits where it must not be taken for one."""
    doc = plain_json(rt / "hta/tests/data/nccl_parser_config/nccl_data.json.gz")
    doc = json.loads(json.dumps(doc, default=float))  # Decimals -> floats the stdlib can write back
    events = doc.pop("traceEvents")
    kernels = [e for e in events if e.get("cat") == "kernel"]
    for i, e in enumerate(kernels[:200]):
        # names that end like an event and start another: `}, {"` inside strings
        e["name"] = e["name"] + '"}, {"ph": "X", "cat": "kernel", "name": "fake' + str(i)
        # arrays of objects in args: `},{"` between nested objects
        e["args"]["nested"] = [{"a": 1}, {"b": [{"c": 2}, {"d": 3}]}]
    devices = doc.pop("deviceProperties")
    # the events first, then more keys holding "}, {" and "]" (as some writers order them)
    out = {"schemaVersion": doc.pop("schemaVersion"), "traceEvents": events,
           "deviceProperties": devices + [{"id": 1, "name": "}] fake"}], **doc}
    return out, json.dumps(out, indent=1).encode()


def test_boundary_lookalikes_inside_strings_and_nested_objects(rt, tmp_path, tiny_chunks):
    """GIVEN a real trace whose kernel names contain '"}, {"ph": "X", ...' and whose args hold arrays of objects,
    with deviceProperties (more '}, {' and ']') written after the events
    WHEN read in tiny chunks THEN every event is read once with its exact name and times, as json finds them."""
    doc, raw = _adversarial(rt)
    p = tmp_path / "adversarial.pt.trace.json"
    p.write_bytes(raw)
    res = load([p])
    assert not res.warnings
    tl = res.timelines[0]
    events = doc["traceEvents"]
    ref = Counter((e["name"], us_to_ns(repr(e["ts"]))) for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")
    is_k = np.isin(tl.kind, (Kind.KERNEL, Kind.COMM))
    got = Counter((tl.names[n], s - tl.meta["base_time_ns"]) for n, s in zip(tl.name[is_k].tolist(), tl.start[is_k].tolist()))
    assert got == ref
    assert sum(1 for n in tl.names if n.endswith("fake0")) == 1
    assert len(tl.meta["flows"]["id"]) == sum(1 for e in events if e.get("ph") in ("s", "f", "t"))
    assert tl.meta["devices"] == [d["name"] for d in doc["deviceProperties"]]


def test_events_with_unknown_phase_null_args_or_object_ids(rt, tmp_path):
    """GIVEN real events, one with an unknown ph, one with "args": null, one whose pid is a JSON object
    WHEN loaded THEN the unknown-ph event is skipped as malformed, the null-args event kept without correlation,
    the object-pid event dropped as malformed, and every other event read as usual."""
    doc = json.loads(gzip.decompress((rt / "hta/tests/data/trace_compare/base/base.json.gz").read_bytes()))
    x = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    x[0]["ph"] = "Q"
    x[1]["args"] = None
    x[2]["pid"] = {"not": "hashable"}
    p = tmp_path / "odd.pt.trace.json"
    p.write_text(json.dumps(doc))
    res = load([p])
    tl = res.timelines[0]
    assert len(tl) == len(x) - 2
    assert any("1 malformed event(s) skipped" in w and "Invalid enum value 'Q'" in w for w in res.warnings)
    assert tl.meta["dropped_events"].get("malformed") == 1
    i = int(np.flatnonzero(np.array(tl.names)[tl.name] == x[1]["name"])[0])
    assert tl.meta["correlation"][i] == -1


_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.function_scoped_fixture])


@_FUZZ
@given(cut=st.floats(0.05, 1.0), pos=st.floats(0, 1), junk=st.sampled_from([b"}, {\"", b"]", b"\xff", b"\x01", b"",
                                                                           b'"', b"}]", b",", b"NaN"]))
def test_streaming_and_whole_file_agree_on_damaged_input(rt, tiny_chunks, cut, pos, junk):
    """GIVEN a real trace, cut and with boundary-like or invalid bytes inserted WHEN read by the streaming path and
    by the whole-file path THEN both give the same Timeline, or both the same one-line BadInput."""
    raw = gzip.decompress((rt / "hta/tests/data/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"
                           ).read_bytes())
    raw = raw[: max(1, int(len(raw) * cut))]
    i = int(pos * len(raw))
    data = raw[:i] + junk + raw[i:]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.pt.trace.json"
        p.write_bytes(data)
        try:
            a = read_chrome_file(p)
        except BadInput as exc:
            with pytest.raises(BadInput) as again:
                read_chrome(read_bytes(p), p)
            assert str(again.value) == str(exc)
            return
        _same(a, read_chrome(read_bytes(p), p))


def _window_bytes(path: Path, max_bytes: int = 1 << 40) -> tuple[bytes, list[str]]:
    """Every byte a Window delivers, read to the end (each piece dropped once taken)."""
    out = bytearray()
    with window.Window(path, max_bytes=max_bytes) as w:
        while w.more(w.hi):
            out += w.buf[: w.hi]
            w.base += w.hi
            w.hi = 0
        return bytes(out), list(w.warnings)


def _gzip_variants(raw_gz: bytes) -> dict[str, bytes]:
    n = len(raw_gz)
    corrupt = bytearray(raw_gz)
    corrupt[n // 2] ^= 0xFF
    return {
        "intact": raw_gz,
        "cut at 37 %": raw_gz[: int(n * 0.37)],
        "corrupt byte in the middle": bytes(corrupt),
        "garbage after the stream": raw_gz + b"not gzip at all",
        "zero padding after the stream": raw_gz + bytes(4096),
        "two members": raw_gz + raw_gz,
    }


@pytest.mark.parametrize("variant", list(_gzip_variants(b"x" * 64)))
def test_gzip_inflated_into_the_window_or_read_the_careful_way(rt, tmp_path, tiny_chunks, variant):
    """GIVEN a real .json.gz intact, with zero padding or two members (all valid gzip), or cut, corrupted, or
    followed by garbage
    WHEN its bytes are taken through the Window (ISA-L inflating straight into it, 777 bytes at a time)
    THEN valid gzip gives byte for byte what the careful inflater (read_bytes) gives, without warnings; garbage
    after the stream gives the same bytes with read_bytes' one warning naming the garbage's offset (issue 42:
    it was ignored without a word); cut or corrupt gzip raises DamagedGzip, and load() then gives exactly the
    careful whole-file result with its warnings."""
    raw_gz = (rt / "hta/tests/data/trace_compare/base/base.json.gz").read_bytes()
    data = _gzip_variants(raw_gz)[variant]
    p = tmp_path / "t.pt.trace.json.gz"
    p.write_bytes(data)
    if variant in ("intact", "zero padding after the stream", "two members", "garbage after the stream"):
        got, warnings = _window_bytes(p)
        ref = read_bytes(p)
        assert got == bytes(ref.data) and warnings == ref.warnings
        if variant == "garbage after the stream":
            assert warnings == [f"{p}: trailing data after the end of the gzip stream, from byte {len(raw_gz):,} of "
                                f"the file (15 bytes), is not gzip data; ignored"]
            # the trace is read whole, the warning first
            careful = read_chrome(ref, p)
            careful.warnings[:0] = ref.warnings
            _same(read_chrome_file(p), careful)
        else:
            assert not warnings
        return
    with pytest.raises(window.DamagedGzip):
        _window_bytes(p)
    try:
        loaded = read_bytes(p)
        careful = read_chrome(loaded, p)
    except BadInput as exc:
        with pytest.raises(BadInput) as again:
            read_chrome_file(p)
        assert str(again.value) == str(exc)
        return
    careful.warnings[:0] = loaded.warnings  # the reading's warnings first
    _same(read_chrome_file(p), careful)
    assert careful.warnings


def test_window_enforces_the_size_cap_while_inflating(rt, tmp_path):
    """GIVEN a real .json.gz and a cap below its decompressed size WHEN read through the Window THEN one-line
    BadInput naming the cap, raised before more than the cap (+ one piece) was inflated."""
    path = rt / NCCL_GZ
    size = len(gzip.decompress(path.read_bytes()))
    with pytest.raises(BadInput) as ei:
        _window_bytes(path, max_bytes=size // 3)
    msg = str(ei.value)
    assert "\n" not in msg and "size cap" in msg and "--max-bytes" in msg
    got, _ = _window_bytes(path, max_bytes=size)
    assert len(got) == size


def test_a_category_kineto_does_not_write_is_read_like_any_other(rt, tmp_path, tiny_chunks):
    """GIVEN a real Kineto trace where one kernel in the middle gets a category no Kineto writes
    WHEN loaded in tiny chunks (the decoder that knows Kineto's categories fails on that chunk and the general
    one takes over) THEN every event is still read: same count, same times, only that event's kind differs."""
    doc = plain_json(rt / NCCL_GZ)
    doc = json.loads(json.dumps(doc, default=float))
    events = doc["traceEvents"]
    kernels = [i for i, e in enumerate(events) if e.get("cat") == "kernel"]
    odd = kernels[len(kernels) // 2]
    ref_p = tmp_path / "ref.pt.trace.json"
    ref_p.write_text(json.dumps(doc))
    events[odd]["cat"] = "vendor_specific_category"
    p = tmp_path / "odd.pt.trace.json"
    p.write_text(json.dumps(doc))
    ref, got = load([ref_p]).timelines[0], load([p]).timelines[0]
    assert len(got) == len(ref)
    assert np.array_equal(got.start, ref.start) and np.array_equal(got.dur, ref.dur)
    differs = np.flatnonzero(got.kind != ref.kind)
    assert len(differs) == 1 and got.kind[differs[0]] == Kind.OTHER and ref.kind[differs[0]] in (Kind.KERNEL, Kind.COMM)
    assert got.names[got.name[differs[0]]] == events[odd]["name"]

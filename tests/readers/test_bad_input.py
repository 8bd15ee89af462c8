"""Damaged and unusable inputs: each gives a one-line warning (and the readable part) or a one-line BadInput."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from expo_prof.errors import BadInput
from expo_prof.readers import load
from expo_prof.timeline import Kind

SMALL = "hta/tests/data/trace_compare/base/base.json.gz"  # 33 real events, kernels on stream 7
NCCL = "hta/tests/data/nccl_parser_config/nccl_data.json.gz"


def _one_line(msg: str) -> str:
    assert "\n" not in msg and msg.strip() == msg and msg
    return msg


def _bad(paths, **kw) -> str:
    with pytest.raises(BadInput) as ei:
        load(paths, **kw)
    assert ei.value.exit_code == 2
    return _one_line(str(ei.value))


def _real_json(rt, rel=SMALL) -> bytes:
    return gzip.decompress((rt / rel).read_bytes())


def test_truncated_gzip_keeps_the_readable_events(rt, tmp_path):
    """GIVEN a real .json.gz cut at 60 % of its compressed bytes
    WHEN loaded THEN the events decompressed before the cut are read, with warnings saying the gzip stream and
    the JSON were truncated and how many bytes were skipped."""
    full = load([rt / NCCL]).timelines[0]
    p = tmp_path / "cut.pt.trace.json.gz"
    data = (rt / NCCL).read_bytes()
    p.write_bytes(data[: int(len(data) * 0.6)])
    res = load([p])
    tl = res.timelines[0]
    assert 0 < len(tl) < len(full)
    assert any("gzip stream is truncated" in w for w in res.warnings)
    assert any("JSON is truncated" in w and "skipped the last" in w for w in res.warnings)
    for w in res.warnings:
        _one_line(w)
    # Kineto writes baseTimeNanoseconds after the events: the cut file lost it, and says so.
    assert any("baseTimeNanoseconds was cut off" in w for w in res.warnings)
    # What was kept is a prefix of the real trace: every kept kernel exists in the full one (relative clock).
    base = full.meta["base_time_ns"]
    k_full = set(zip((full.start[full.kind == Kind.KERNEL] - base).tolist(), full.dur[full.kind == Kind.KERNEL].tolist()))
    assert set(zip(tl.start[tl.kind == Kind.KERNEL].tolist(), tl.dur[tl.kind == Kind.KERNEL].tolist())) <= k_full


def test_gzip_cut_in_header_is_bad_input(rt, tmp_path):
    """GIVEN only the first 10 bytes of a gzip file WHEN loaded THEN one-line BadInput (nothing readable)."""
    p = tmp_path / "x.pt.trace.json.gz"
    p.write_bytes((rt / SMALL).read_bytes()[:10])
    assert "truncated" in _bad([p])


def test_invalid_json_in_the_middle_skips_only_the_garbage(rt, tmp_path):
    """GIVEN a real trace with garbage written between two events in its middle WHEN loaded THEN every event
    before and after the garbage is read (issue 34: reading resumes after the damage) and the warning counts the
    malformed stretch; garbage at the very start is a one-line BadInput."""
    raw = _real_json(rt)
    n_all = raw.count(b'"ph"')
    mid = raw.index(b"}, {", len(raw) // 2) + 3  # between two events, outside any string
    p = tmp_path / "mid.pt.trace.json"
    p.write_bytes(raw[:mid] + b"@@garbage@@" + raw[mid:])
    res = load([p])
    assert any("1 malformed event(s) skipped (first: invalid character" in w for w in res.warnings)
    assert res.timelines[0].meta["events_in_file"] == n_all
    p.write_bytes(b"@@" + raw)
    assert "not valid JSON" in _bad([p])


def test_invalid_utf8_in_names_is_replaced_and_counted(rt, tmp_path):
    """GIVEN a real trace with invalid UTF-8 bytes inside two kernel names WHEN loaded THEN all events are kept,
    the bad bytes become U+FFFD and the warning gives their count."""
    raw = _real_json(rt)
    doc = json.loads(raw)
    kernels = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    first, second = sorted(set(kernels))[:2]
    a, b = first.encode(), second.encode()
    damaged = raw.replace(b'"' + a + b'"', b'"' + a[:5] + b"\xff\xfe" + a[5:] + b'"', 1)
    damaged = damaged.replace(b'"' + b + b'"', b'"' + b[:3] + b"\xc3" + b[3:] + b'"', 1)
    # An independent count of the invalid sequences: \xff, \xfe and a lone lead byte \xc3.
    assert damaged.decode("utf-8", "replace").count("\ufffd") == 3
    p = tmp_path / "utf8.pt.trace.json"
    p.write_bytes(damaged)
    res = load([p])
    tl = res.timelines[0]
    assert int((tl.kind == Kind.KERNEL).sum()) == len(kernels)
    assert any("\ufffd" in n for n in tl.names)
    assert any("invalid UTF-8" in w and w.split(": ")[1].startswith("3 ") for w in res.warnings), res.warnings


def test_control_characters_in_names_are_recovered(rt, tmp_path):
    """GIVEN raw control characters (0x01, a raw newline) inside names of a real trace (invalid JSON)
    WHEN loaded THEN every event is kept, the characters become spaces and a warning counts them."""
    raw = _real_json(rt)
    doc = json.loads(raw)
    name = next(e["name"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op").encode()
    damaged = raw.replace(b'"' + name + b'"', b'"' + name[:2] + b"\x01\n" + name[2:] + b'"')
    p = tmp_path / "ctrl.pt.trace.json"
    p.write_bytes(damaged)
    res = load([p])
    assert len(res.timelines[0]) == len(load([rt / SMALL]).timelines[0])
    assert any(n.startswith(name[:2].decode() + "  ") for n in res.timelines[0].names)
    assert any("control character" in w for w in res.warnings)


def test_missing_fields(rt, tmp_path):
    """GIVEN real events with their ts removed, and a JSON object without traceEvents
    WHEN loaded THEN the ts-less events are skipped with a counted warning; no traceEvents is BadInput."""
    doc = json.loads(_real_json(rt))
    x = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    for e in x[:3]:
        del e["ts"]
    p = tmp_path / "missing.pt.trace.json"
    p.write_text(json.dumps(doc))
    res = load([p])
    assert any("3 event(s) without a usable ts/dur skipped" in w for w in res.warnings)
    assert len(res.timelines[0]) == len(x) - 3
    p.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": []}))
    assert "without a traceEvents array" in _bad([p])


@pytest.mark.parametrize(
    ("name", "content", "expect"),
    [
        ("e.pt.trace.json", b"", "empty file"),
        ("e.pt.trace.json", b'{"traceEvents": []}', "no events"),
        ("trace_view.json", b"[]", "no events"),
        ("e.pt.trace.json", b'{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]}',
         "no usable timed events"),
        ("kernel_details.csv", b"", "empty file"),
        ("kernel_details.csv", b"Step Id,Name,Type\n1,a,b\n", "missing column"),
        ("kernel_details.csv", b"Name,Start Time(us),Duration(us)\n", "no kernel rows"),
        ("ascend_pytorch_profiler_0.db", b"SQLite format 3\x00" + os.urandom(200), "SQLite"),
        ("ascend_pytorch_profiler_0.db", b"", "no TASK table"),
        ("expo-prof-events-h-1.jsonl", b"\n\n", "empty event log"),
    ],
)
def test_empty_and_unusable_files(tmp_path, name, content, expect):
    """GIVEN an empty or unusable file of each format WHEN loaded THEN one-line BadInput naming the problem."""
    p = tmp_path / name
    p.write_bytes(content)
    msg = _bad([p])
    assert expect in msg and str(p) in msg


def test_directory_with_nothing_recognisable(tmp_path):
    """GIVEN a directory of unrelated files WHEN loaded THEN BadInput lists what was looked for."""
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "data.bin").write_bytes(os.urandom(100))
    msg = _bad([tmp_path])
    assert msg.startswith(f"no recognisable trace in {tmp_path}") and "trace_view.json" in msg and "expo-prof-events" in msg
    assert "no such file" in _bad([tmp_path / "absent"])


def test_decompression_bomb_is_capped(tmp_path):
    """GIVEN a 60 MB-of-spaces gzip (60 KB on disk) WHEN loaded with max_bytes=8 MB THEN BadInput names the cap,
    before more than the cap is held in memory. (Zeros are refused sooner, from the first window: issue 42,
    tests/readers/test_nul_and_concatenated.py.)"""
    p = tmp_path / "bomb.pt.trace.json.gz"
    p.write_bytes(gzip.compress(b" " * 60_000_000, compresslevel=9))
    assert p.stat().st_size < 200_000
    msg = _bad([p], max_bytes=8_000_000)
    assert "decompresses to more than 8.0 MB" in msg and "gzip bomb" in msg


def test_bad_file_among_good_ones_is_skipped(rt, tmp_path):
    """GIVEN one good real trace and one broken file WHEN both are loaded THEN the good one is read and the broken
    one is in skipped with a one-line reason."""
    bad = tmp_path / "broken.pt.trace.json"
    bad.write_bytes(b"{nope")
    res = load([rt / SMALL, bad])
    assert len(res.timelines) == 1
    assert [p for p, _ in res.skipped] == [bad]
    _one_line(res.skipped[0][1])


def test_size_cap_holds_on_the_careful_gzip_path(tmp_path):
    """GIVEN a gzip bomb (60 MB of zeros) that is also truncated, so only the careful inflater can read it
    WHEN read with an 8 MB cap THEN one-line BadInput names the cap; with a cap above what the cut file holds,
    the readable bytes come back with a truncation warning."""
    from expo_prof.readers.file_bytes import read_bytes

    comp = gzip.compress(b"\0" * 60_000_000, compresslevel=9)
    p = tmp_path / "cut-bomb.json.gz"
    p.write_bytes(comp[: len(comp) // 2])
    with pytest.raises(BadInput) as ei:
        read_bytes(p, max_bytes=8_000_000)
    msg = _one_line(str(ei.value))
    assert "decompresses to more than 8.0 MB" in msg and "--max-bytes" in msg
    got = read_bytes(p, max_bytes=100_000_000)
    assert 8_000_000 < len(got.data) < 60_000_000 and not any(got.data)
    assert any("gzip stream is truncated" in w for w in got.warnings)


def test_flow_ids_that_are_lists_drop_those_flows_only(rt, tmp_path):
    """GIVEN a real Kineto trace whose flow events (ph s/f) all carry an id that is a JSON list
    WHEN loaded THEN those flows are counted as malformed and every other event is read (a list id once made a
    2-D column, and the file was refused as an internal error)."""
    doc = json.loads(_real_json(rt, NCCL))
    flows = [e for e in doc["traceEvents"] if e.get("ph") in ("s", "f")]
    assert flows, "the trace has flows"
    for e in flows:
        e["id"] = [e["id"]]
    p = tmp_path / "list-ids.pt.trace.json"
    p.write_text(json.dumps(doc))
    tl = load([p]).timelines[0]
    full = load([rt / NCCL]).timelines[0]
    assert len(tl.start) == len(full.start) and tl.names == full.names
    assert len(tl.meta["flows"]["id"]) == 0
    assert tl.meta["dropped_events"]["malformed"] == len(flows)

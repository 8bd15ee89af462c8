"""The reader and the export walk a Chrome trace the same way (expo_prof/readers/chrome/walk.py): a blank tail.

The reader (``read_chrome_file``: events decoded into a Timeline) and the JSON / Perfetto export
(``raw_trace.load_raw``: every event passed through as undecoded bytes) once had a walk each over the event
array, and they had drifted apart on blanks: the export held a trailing run of whitespace whole (a 64 MB blank
tail took a 128 MB window) and refused a trace whose head held a long blank run. Both now use
:class:`~expo_prof.readers.chrome.walk.ArrayWalk`: a trailing blank tail is accepted by both, never an error,
never lost data, and never held.

The traces are GENERATED here (a step and a few ops of a Kineto trace, with ``args``), as an object with
top-level keys after the array, and as a bare array.
"""

from __future__ import annotations

import gzip
import tracemalloc
from pathlib import Path

import orjson
import pytest

from expo_prof.export.raw_trace import load_raw
from expo_prof.readers.chrome.reader import read_chrome_file
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED
from support.hostile import write_blank_gzip

MB = 1 << 20
#: What the export's check walk may allocate at peak over a trace of a few KB, whatever its blank tail (the
#: window starts at 1 MB; holding a 64 MB tail took 128 MB).
WALK_PEAK = 8 * MB


def _events(n: int = 40) -> list[bytes]:
    """A step and ``n`` ops (two threads), each with args."""
    out = [b'{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":%d}' % (n * 10 + 50)]
    for i in range(n):
        out.append(b'{"ph":"X","cat":"cpu_op","name":"aten::op%d","pid":1,"tid":%d,"ts":%d,"dur":5,'
                   b'"args":{"External id":%d,"shape":"[[8, 16], [16, 4]]"}}' % (i, 1 + i % 2, 10 + i * 10, i))
    return out


def _doc(kind: str) -> bytes:
    ev = b",\n  ".join(_events())
    if kind == "array":
        return b"[" + ev + b"]"
    return b'{"schemaVersion": 1, "traceEvents": [' + ev + b'], "traceName": "generated", "baseTimeNanoseconds": 0}'


TAILS = {
    "none": b"",
    "newline": b"\n",
    "mixed": b" \t\r\n" * 8,
    "long": b" " * (200 * 1024),  # past the 64 KB a blank run is dropped at, within the 1 MB window
}


def _write(path: Path, data: bytes, gz: bool) -> Path:
    path.write_bytes(gzip.compress(data, 1) if gz else data)
    return path


def _reader(path: Path) -> tuple:
    """What the reader made of ``path``: its events (name, start, dur), the events in the file, its warnings."""
    tl = read_chrome_file(path)
    events = sorted((tl.names[n], int(s), int(d)) for n, s, d in zip(tl.name, tl.start, tl.dur))
    return events, tl.meta["events_in_file"], tl.warnings


def _export(path: Path) -> tuple:
    """What the export's walk made of ``path``: the events' text as passed through, their count, the top-level
    keys (as bytes) and the complete events' names."""
    raw = load_raw(path, DEFAULT_MAX_DECOMPRESSED)
    pieces = list(raw.pieces())
    text = b"".join(t for _new, t, _raws in pieces)
    names = sorted(ev["name"] for _n, _t, raws in pieces for r in raws if (ev := orjson.loads(bytes(r)))["ph"] == "X")
    return text, raw.n_events, {k: bytes(v) for k, v in raw.top.items()}, names


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("kind", ["object", "array"])
def test_reader_and_export_agree_with_and_without_a_blank_tail(tmp_path, kind, gz):
    """GIVEN a GENERATED trace (an object with keys after the event array, or a bare array), written with no
    tail and with blank tails after the document (a newline, mixed blanks, 200 KB of spaces), plain and gzip
    WHEN each is read by the reader and walked by the export
    THEN neither refuses it nor warns; the reader's events and the export's passed-through events are the same
    41 (the export's text is the array's own), and a blank tail changes nothing either makes of the trace."""
    doc = _doc(kind)
    got = {}
    for name, tail in TAILS.items():
        path = _write(tmp_path / f"{kind}-{name}.pt.trace.json{'.gz' if gz else ''}", doc + tail, gz)
        got[name] = (_reader(path), _export(path))
    (events, in_file, warnings), (text, n_events, top, names) = got["none"]
    # The two walks agree: every event of the file, the same complete events.
    assert in_file == n_events == 41 and warnings == []
    assert sorted(e[0] for e in events) == names
    assert text == b",\n  ".join(_events())
    assert list(top) == ([] if kind == "array" else ["schemaVersion", "traceName", "baseTimeNanoseconds"])
    # A blank tail changes nothing, for either.
    for name in TAILS:
        assert got[name] == got["none"], name


@pytest.mark.parametrize("where", ["after the document", "after the array"])
def test_a_long_blank_tail_is_never_held_by_the_export(tmp_path, where):
    """GIVEN a GENERATED Kineto trace of a few KB followed by 64 MB of spaces (gzip: a whitespace bomb), after the
    document or between the event array's ``]`` and the keys after it
    WHEN the export checks and walks it, and the reader reads it
    THEN both take its 41 events; the export's walk allocates under 8 MB at peak (it held the blank run
    whole: a 128 MB window)."""
    doc = _doc("object")
    a1 = doc.rindex(b"]") + 1
    prefix, suffix = (doc, b"") if where == "after the document" else (doc[:a1], doc[a1:])
    path = tmp_path / "blank-tail.pt.trace.json.gz"
    write_blank_gzip(path, 64 * MB, prefix=prefix, suffix=suffix)
    tracemalloc.start()
    try:
        raw = load_raw(path, DEFAULT_MAX_DECOMPRESSED)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert raw.n_events == 41 and list(raw.top) == ["schemaVersion", "traceName", "baseTimeNanoseconds"]
    assert peak < WALK_PEAK, peak
    assert sum(len(raws) for _n, _t, raws in raw.pieces()) == 41
    _events_read, in_file, warnings = _reader(path)
    assert in_file == 41 and warnings == []

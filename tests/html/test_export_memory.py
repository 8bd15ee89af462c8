"""Issue 34 item 3: ``export`` passes a source through a window at a time, so its own peak memory does not grow
with the source file (it read the file whole: 1.4 GB at peak for a 1 GB trace).

The traces are GENERATED here (Kineto JSON: a step, a few exponential draws, and ``N`` ``aten::mm`` events on
another thread, each with 2 KB of args, as a trace recorded with shapes and stacks has), for ``N`` and ``4 N``
events: the source grows by 2 KB per event, the timeline (and the analysis written beside the source's events)
by a few dozen bytes. The export's own peak is measured with tracemalloc (counted
bytes: the numpy columns, the buffers and every Python object), from after the recording was read to the last
byte written, for the JSON export (every event passed through byte for byte) and the Perfetto export.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import orjson
import pytest

from expo_prof.html.build import one_recording
from expo_prof.pipeline import Options, run
from expo_prof.readers.file_bytes import DEFAULT_MAX_DECOMPRESSED

#: Each test here costs seconds of a core (a sweep over real traces): make test-fast leaves the module to make test.
pytestmark = pytest.mark.slow

N = 10_000
ARGS = "s" * 2048


def _trace(path: Path, n: int, args: str = ARGS) -> Path:
    """A Kineto trace of ``n`` aten::mm events (about 2.2 KB each) and 20 draws, in one step."""
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [')
        f.write(f'{{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":{n * 10 + 100}}}')
        for i in range(20):
            f.write(f',{{"ph":"X","cat":"cpu_op","name":"aten::exponential_","pid":1,"tid":2,"ts":{10 + i * 10},"dur":5}}')
        for i in range(n):
            f.write(f',\n  {{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{10 + i * 10},"dur":3,'
                    f'"args":{{"External id":{i},"stack":"{args}"}}}}')
        f.write('], "traceName": "generated", "baseTimeNanoseconds": 0}')
    return path


def _export_peak(path: Path, fmt: str) -> tuple[int, bytes]:
    """(bytes allocated at peak by the export alone, the document written)."""
    rr = one_recording(run([path], Options.make(op="exponential")), "export")
    if fmt == "json":
        from expo_prof.export.chrome import export_chrome as write
    else:
        from expo_prof.export.perfetto import export_perfetto as write
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        chunks, _stats, _warns = write(rr, "exponential", DEFAULT_MAX_DECOMPRESSED)
        head, size = b"", 0
        for c in chunks:  # written and dropped, as the command streams them to the file
            if len(head) < 256:
                head += bytes(c[:256])
            size += len(c)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return peak, head


@pytest.mark.parametrize("fmt", ["json", "perfetto"])
def test_export_peak_memory_does_not_grow_with_the_source(tmp_path: Path, fmt: str) -> None:
    # GIVEN two generated traces, the second with 4x the events (and bytes) of the first
    small, big = _trace(tmp_path / "small.pt.trace.json", N), _trace(tmp_path / "big.pt.trace.json", 4 * N)
    grown = big.stat().st_size - small.stat().st_size
    # WHEN each is exported
    p_small, _ = _export_peak(small, fmt)
    p_big, head = _export_peak(big, fmt)
    # THEN the export's own peak grows by far less than the source: well under a third of the bytes added
    # (reading the source whole added all of them, and a Raw object per event on top)
    assert p_big - p_small < grown / 3, (p_small, p_big, grown)
    if fmt == "json":  # (and it is the export: a document that opens as the export does)
        assert head.startswith(b'{"schemaVersion":1,"displayTimeUnit":"ns"')


def test_streamed_export_passes_every_event_through_byte_for_byte(tmp_path: Path) -> None:
    # GIVEN a generated trace with keys after its event array, events split over many chunks, and strings that
    # look like an event boundary ("}, {}") where a chunk may end
    src = _trace(tmp_path / "one.pt.trace.json", N, args="x}, {}y" * 3 + "s" * 2000)
    # WHEN it is exported (one rank: the events are copied)
    rr = one_recording(run([src], Options.make(op="exponential")), "export")
    from expo_prof.export.chrome import export_chrome

    chunks, stats, _ = export_chrome(rr, "exponential", DEFAULT_MAX_DECOMPRESSED)
    out = b"".join(chunks)
    # THEN the text between the source's brackets (its newlines and blanks included) is in the export as it is,
    # and the keys after the array are kept
    raw = src.read_bytes()
    inner = raw[raw.index(b"[") + 1 : raw.rindex(b"]")].strip()
    assert out.count(inner) == 1
    doc = orjson.loads(out)
    assert doc["traceName"] == "generated"
    assert stats["source_events"] == N + 21
    assert sum(e.get("name") == "aten::mm" for e in doc["traceEvents"]) == N

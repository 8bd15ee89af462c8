"""NUL-filled files, concatenated documents and trailing data (issue 42, items 5 and 6).

Item 5: a file of NUL bytes (allocated but never written: a crash) cost memory in proportion to its size (a
100 MB NUL ``.pt.trace.json``: 7.6 s and 974 MB; a 3 GB NUL event log: 6.3 GB, its one "line" held whole).
Now a Chrome trace or an event log whose first bytes are NUL (or, for a trace, any byte that cannot start a
JSON document) is refused from the first window; a long run of NUL bytes where a trace goes on ends its data
(before the event array: refused; inside it: the events before it are kept, as for a file cut short; after the
document: see item 6); and an event log is read a piece and a line at a time: a line over ``MAX_LINE_BYTES`` is
skipped unread and its length said. The NUL files here are SPARSE files of 1 GiB
(``os.truncate``: no disk written), read by the real CLI (``python -m expo_prof analyze``) in a child whose
peak RSS is measured (``ru_maxrss`` through a bare wrapper interpreter, as tests/readers/test_hostile_memory.py
does), under RLIMIT_AS = 2 GB so that a regression fails cheaply.

Item 6: ``cat a a`` (two documents, or two gzip members) decoded at ~150 KB/s: every chunk end in the second
document was tried from the same start (549 GB handed to msgspec for a 7.6 MB file, 83 s). Now the first chunk
that reads past the event array's ``]`` settles where the document ends, and what follows it is never read: one
warning names its offset (decided: the first document is read, the second is not read as more events — two
copies of one rank's trace would double every figure). Garbage after a gzip stream gets its own warning. No
time is asserted (docs/testing.md): the tests count the bytes handed to msgspec's decoder instead
(``decode.in_brackets``, wrapped by a counting spy that calls the real function), and bench/bench_trailing.py
prints the time ratios.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from expo_prof.errors import BadInput
from expo_prof.readers import load
from expo_prof.readers.chrome import decode
from expo_prof.readers.chrome.reader import read_chrome
from expo_prof.readers.file_bytes import read_bytes
from expo_prof.readers.overlay_log import MAX_LINE_BYTES
from overlay.events import EventLog

REPO = Path(__file__).resolve().parents[2]
GiB = 1 << 30
#: The peak RSS (MB) issue 42 allows for refusing (or reading past) NUL bytes, whatever their size.
NUL_RSS_MB = 64
#: A real vLLM CPU trace (3.8 MB of JSON).
A = "vllm-cpu/rank0-fp64-gumbel.pt.trace.json.gz"
NUL_WHY = "(a file allocated but never written: a crash?)"

#: Runs its arguments as a child and writes the child's peak RSS (KB) to the file named first (a bare
#: interpreter that starts the CLI by posix_spawn: the CLI's ru_maxrss is its own, not pytest's image).
_WRAPPER = """
import resource, subprocess, sys
try:
    rc = subprocess.run(sys.argv[2:], timeout=240).returncode
except subprocess.TimeoutExpired:
    rc = 124
with open(sys.argv[1], "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(rc)
"""


def _analyze(path: Path, tmp: Path, *args: str) -> tuple[int, str, str, float]:
    """``expo-prof analyze -j 1 PATH ARGS`` in a child: exit status, stdout, stderr, peak RSS (MB)."""
    peak = tmp / "peak.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1", "COLUMNS": "200"}

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * GiB, 2 * GiB))

    p = subprocess.run([sys.executable, "-c", _WRAPPER, str(peak), sys.executable, "-m", "expo_prof", "analyze",
                        "-j", "1", str(path), *args], capture_output=True, text=True, env=env, cwd=REPO,
                       preexec_fn=limit, timeout=300)
    return p.returncode, p.stdout, p.stderr, int(peak.read_text()) / 1024


def _sparse(path: Path, size: int, prefix: bytes = b"", suffix: bytes = b"") -> Path:
    """``prefix``, then NUL bytes (a hole: nothing written) up to ``size``, then ``suffix``."""
    with open(path, "wb") as f:
        f.write(prefix)
        f.seek(size - len(suffix))
        f.write(suffix)
    if not suffix:
        os.truncate(path, size)
    return path


def _gzip_of_nul(path: Path, size: int) -> Path:
    """gzip data inflating to ``size`` NUL bytes: one member of 64 MiB of them, repeated (members concatenated
    are one gzip file)."""
    member = gzip.compress(bytes(64 << 20), compresslevel=1)
    with open(path, "wb") as f:
        for _ in range(size >> 26):
            f.write(member)
    return path


# --------------------------------------------------------------------------- item 5: NUL bytes


@pytest.mark.parametrize("name", ["rank0.pt.trace.json", "rank0.pt.trace.json.gz", "expo-prof-events-host-1.jsonl"])
def test_a_gigabyte_of_nul_bytes_is_refused_from_the_first_window(tmp_path, name):
    """GIVEN 1 GiB of NUL bytes as a Kineto trace (a sparse file, and gzip of them) and as an overlay event log
    WHEN ``expo-prof analyze`` reads it
    THEN exit 2 with one line naming the NUL bytes at byte 0, at a peak RSS ≤ 64 MB (before: the trace was read
    whole and then parsed, ~10 MB of RSS per MB of NUL; the event log held its one "line" whole)."""
    p = tmp_path / name
    if name.endswith(".gz"):
        _gzip_of_nul(p, GiB)
    else:
        _sparse(p, GiB)
    rc, _out, err, peak_mb = _analyze(p, tmp_path)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    what = "not an overlay event log" if name.endswith(".jsonl") else "not valid JSON"
    assert rc == 2 and lines == [f"error: {p}: {what}: NUL bytes from byte 0 {NUL_WHY}"], err[-2000:]
    assert peak_mb <= NUL_RSS_MB, f"peak {peak_mb:.0f} MB"


def test_binary_that_cannot_start_a_json_document_is_refused_from_the_first_window(rt, tmp_path):
    """GIVEN a real trace behind 3 bytes that no JSON document starts with (a UTF-8 byte order mark)
    WHEN loaded THEN one BadInput line names the byte and its offset (the file is not read further)."""
    p = tmp_path / "bom.pt.trace.json"
    p.write_bytes(b"\n\xef\xbb\xbf" + gzip.decompress((rt / A).read_bytes()))
    with pytest.raises(BadInput) as ei:
        load([p])
    assert str(ei.value) == f"{p}: not valid JSON: byte 1 is b'\\xef', where a JSON document starts with {{ or ["


def test_a_trace_followed_by_a_gigabyte_of_nul_bytes_is_read_with_one_warning(rt, tmp_path):
    """GIVEN a real trace followed by 1 GiB of NUL bytes (a sparse file: the end of a file a crash never wrote)
    WHEN analysed THEN the same figures as the trace alone, one warning naming where the NUL bytes start and how
    many there are, at a peak RSS ≤ 64 MB (before: 712 MB for 200 MB of NUL: they were read whole)."""
    raw = gzip.decompress((rt / A).read_bytes())
    alone = tmp_path / "alone.pt.trace.json"
    alone.write_bytes(raw)
    padded = _sparse(tmp_path / "padded.pt.trace.json", len(raw) + GiB, prefix=raw)
    rc0, out0, err0, _ = _analyze(alone, tmp_path, "--json")
    rc, out, err, peak_mb = _analyze(padded, tmp_path, "--json")
    assert rc0 == 0 and rc == 0, err[-2000:]
    ref, got = json.loads(out0), json.loads(out)
    assert got["summary"] == ref["summary"]
    mine = [w for w in got["warnings"] if str(padded) in w]
    assert mine == [f"{padded}: NUL bytes from byte {len(raw):,}, after the end of the JSON document {NUL_WHY}; "
                    f"ignored the last {GiB:,} bytes"], got["warnings"]
    assert peak_mb <= NUL_RSS_MB, f"peak {peak_mb:.0f} MB"


@pytest.mark.parametrize("prefix", [b"{", b'{"schemaVersion": 1, "traceName": "x'], ids=["object", "in a key"])
def test_nul_bytes_before_the_event_array_are_refused_from_the_first_window(tmp_path, prefix):
    """GIVEN the start of a Kineto document, then 1 GiB of NUL bytes (sparse) before any "traceEvents" key
    WHEN analysed THEN exit 2 with one line naming where the NUL bytes start, at a peak RSS ≤ 64 MB (before: the
    first 8 MB were searched for the array, then the whole file read and repaired: 1.9 GB for 200 MB)."""
    p = _sparse(tmp_path / "head.pt.trace.json", GiB, prefix=prefix)
    rc, _out, err, peak_mb = _analyze(p, tmp_path)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and lines == [f"error: {p}: not valid JSON: NUL bytes from byte {len(prefix):,} {NUL_WHY}, before "
                                 "any traceEvents array"], err[-2000:]
    assert peak_mb <= NUL_RSS_MB, f"peak {peak_mb:.0f} MB"


def test_a_trace_cut_by_a_gigabyte_of_nul_bytes_keeps_the_events_before_them(rt, tmp_path):
    """GIVEN a real trace cut in the middle of an event two thirds of the way through, then 1 GiB of NUL bytes
    (sparse: the unwritten end of a file being written when the machine crashed)
    WHEN analysed THEN the same figures as the cut file without the NUL bytes (a file cut short: the events
    before the cut), and its one warning says where the NUL bytes start and which events were kept, at a peak
    RSS ≤ 64 MB (before: the NUL bytes were read whole, twice: 303 MB for 200 MB)."""
    raw = gzip.decompress((rt / A).read_bytes())
    cut = raw.index(b'"ph"', 2 * len(raw) // 3) + 2  # inside an event
    short = tmp_path / "short.pt.trace.json"
    short.write_bytes(raw[:cut])
    padded = _sparse(tmp_path / "padded.pt.trace.json", cut + GiB, prefix=raw[:cut])
    rc0, out0, err0, _ = _analyze(short, tmp_path, "--json")
    rc, out, err, peak_mb = _analyze(padded, tmp_path, "--json")
    assert rc0 == 0 and rc == 0, err[-2000:]
    ref, got = json.loads(out0), json.loads(out)
    assert got["summary"] == ref["summary"]
    (was,) = [w for w in ref["warnings"] if "JSON is truncated" in w]
    kept = int(was.split("kept the events before byte ")[1].split(", skipped")[0].replace(",", ""))
    mine = [w for w in got["warnings"] if str(padded) in w]
    assert mine == [f"{padded}: JSON is truncated by NUL bytes from byte {cut:,} {NUL_WHY}; kept the events before "
                    f"byte {kept:,}, skipped the last {cut + GiB - kept:,} bytes"], got["warnings"]
    assert peak_mb <= NUL_RSS_MB, f"peak {peak_mb:.0f} MB"


def _event_log(tmp_path: Path, steps: int) -> list[bytes]:
    """The lines of a real event log (the overlay's own EventLog): header, ``steps`` step lines, summary."""
    log = EventLog(str(tmp_path))
    log.configure(backend="cpu", lane="thread", rank=0)
    for i in range(steps):
        log.step({"step": i, "rank": 0, "rows": 4, "vocab": 2048, "dtype": "float32", "launched": True,
                  "used": True, "fallback": None, "t0_ns": 1_000_000 * (i + 1), "fwd": [100, 50_000],
                  "exp": [200, 1_200], "wait": [50_100, 50_200], "timing": "host"})
    log.close()
    lines = Path(log.path).read_bytes().split(b"\n")
    os.unlink(log.path)
    assert lines[-1] == b"" and len(lines) == steps + 3
    return lines[:-1]


@pytest.mark.slow  # reading the 1 GiB line to measure it: ~3 s of a core (the page cache of the hole)
def test_an_event_log_line_over_the_maximum_is_skipped_with_its_length(tmp_path):
    """GIVEN a real event log of 6 steps with a line of 1 GiB of NUL bytes after its header (a sparse hole)
    WHEN analysed THEN the 6 draws are counted, one warning names that line and its length, and the peak RSS
    stays ≤ 64 MB: lines are read a piece at a time and one over MAX_LINE_BYTES is not held (before: the whole
    file was read, then split)."""
    lines = _event_log(tmp_path, 6)
    head = lines[0] + b"\n"
    p = _sparse(tmp_path / "expo-prof-events-host-2.jsonl", len(head) + GiB + 1 + len(b"\n".join(lines[1:])) + 1,
                prefix=head, suffix=b"\n" + b"\n".join(lines[1:]) + b"\n")
    rc, out, err, peak_mb = _analyze(p, tmp_path, "--json")
    assert rc == 0, err[-2000:]
    doc = json.loads(out)
    assert doc["summary"]["instances"] == 6
    mine = [w for w in doc["warnings"] if str(p) in w]
    assert mine == [f"{p}: 1 line longer than the {MAX_LINE_BYTES / 1e6:.1f} MB an event-log line may hold "
                    f"skipped unread (the first: line 2: {GiB:,} bytes)"], doc["warnings"]
    assert peak_mb <= NUL_RSS_MB, f"peak {peak_mb:.0f} MB"


@pytest.mark.parametrize("extra", [30, 3 << 20], ids=["just over", "3 MiB over"])
def test_a_log_whose_first_line_is_over_the_maximum_names_it(tmp_path, extra):
    """GIVEN an event log whose only line is a JSON "header" object longer than MAX_LINE_BYTES (no NUL byte):
    ending just after the first MAX_LINE_BYTES, and 3 MiB after them
    WHEN loaded THEN one BadInput line saying there is no header line and naming the long line with its length
    (read up to the first piece past MAX_LINE_BYTES: at least that many bytes, when the line goes on)."""
    p = tmp_path / "expo-prof-events-host-3.jsonl"
    line = b'{"type": "header", "schema": 3, "pad": "' + b"x" * (MAX_LINE_BYTES + extra) + b'"}'
    p.write_bytes(line + b"\n")
    with pytest.raises(BadInput) as ei:
        load([p])
    pieces = MAX_LINE_BYTES // (1 << 20) + 1  # read a MiB at a time
    length = f"{len(line):,} bytes" if len(line) < pieces << 20 else f"{pieces << 20:,} bytes and more"
    assert str(ei.value) == (f"{p}: not an overlay event log: no header line (line 1: {length}, longer than the "
                             f"{MAX_LINE_BYTES / 1e6:.1f} MB an event-log line may hold)")


# --------------------------------------------------------------------------- item 6: what follows a document


@pytest.fixture
def decoded(monkeypatch) -> list[int]:
    """Bytes handed to msgspec's decoder by the chunk loop: a counting spy around the real ``in_brackets``."""
    total = [0]
    real = decode.in_brackets

    def counting(buf, s, e, dec):
        total[0] += e - s
        return real(buf, s, e, dec)

    monkeypatch.setattr(decode, "in_brackets", counting)
    return total


def _same(a, b) -> None:
    for col in ("start", "dur", "lane", "name", "kind", "step"):
        assert np.array_equal(getattr(a, col), getattr(b, col)), col
    assert a.names == b.names and a.lanes == b.lanes


def _second_document_at(raw: bytes) -> int:
    """The offset of the first byte of ``raw + raw``'s second copy that is not blank."""
    return len(raw) + len(raw) - len(raw.lstrip(b" \t\r\n"))


@pytest.mark.parametrize("gz", [False, True], ids=["cat a a", "cat a.gz a.gz"])
def test_two_concatenated_traces_read_as_the_first_with_one_warning(rt, tmp_path, decoded, gz):
    """GIVEN a real trace A and ``cat A A`` (plain: two JSON documents; gzip: two members)
    WHEN loaded THEN the same events as A alone, and the warnings of A plus one first naming the offset where
    the second document starts (decompressed, for gzip); msgspec is handed at most 4 chunks more than for A
    (before: 249,493 decodes, 549 GB for the 7.6 MB file)."""
    comp = (rt / A).read_bytes()
    raw = gzip.decompress(comp)
    one, two = tmp_path / "a.pt.trace.json", tmp_path / "aa.pt.trace.json"
    if gz:
        one, two = one.with_suffix(".json.gz"), two.with_suffix(".json.gz")
    one.write_bytes(comp if gz else raw)
    two.write_bytes(comp + comp if gz else raw + raw)
    ref = load([one]).timelines[0]
    alone = decoded[0]
    decoded[0] = 0
    got = load([two]).timelines[0]
    _same(got, ref)
    at = _second_document_at(raw)
    where = f"byte {at:,} of the decompressed data" if gz else f"byte {at:,}"
    rest = "the rest of the file" if gz else f"the last {2 * len(raw) - at:,} bytes"
    assert got.warnings == [f"{two}: a second JSON document starts at {where} (files concatenated?); read the "
                            f"first one only, ignored {rest}"] + [w.replace(str(one), str(two)) for w in ref.warnings]
    assert decoded[0] <= alone + 4 * decode.CHUNK_BYTES, (decoded[0], alone)


def test_two_concatenated_traces_in_memory_read_as_the_first(rt, tmp_path, decoded):
    """GIVEN ``A + A`` already in memory (``read_chrome``: the whole-file path)
    WHEN read THEN the same events as A and the one warning, with the count of bytes ignored; msgspec is handed
    at most 4 chunks more than for A."""
    raw = gzip.decompress((rt / A).read_bytes())
    p = tmp_path / "aa.pt.trace.json"
    ref = read_chrome(bytearray(raw), p)
    alone = decoded[0]
    decoded[0] = 0
    got = read_chrome(bytearray(raw + raw), p)
    _same(got, ref)
    at = _second_document_at(raw)
    assert got.warnings == [f"{p}: a second JSON document starts at byte {at:,} (files concatenated?); read the "
                            f"first one only, ignored the last {2 * len(raw) - at:,} bytes", *ref.warnings]
    assert decoded[0] <= alone + 4 * decode.CHUNK_BYTES, (decoded[0], alone)


def test_trailing_garbage_after_a_document_is_one_warning(rt, tmp_path, decoded):
    """GIVEN a real trace followed by 600,000 bytes of garbage made of JSON punctuation (``]``, ``}, {"``: what
    the chunk loop takes for event boundaries and the array's end)
    WHEN loaded THEN the same events as the trace, one warning naming where the garbage starts and its size;
    msgspec is handed at most 4 chunks more than for the trace alone (before: 130 GB, 71 s)."""
    raw = gzip.decompress((rt / A).read_bytes())
    rng = random.Random(42)
    junk = b"".join(rng.choice([b'}, {"', b"]", b"x", b" ", b'"', b"{"]) for _ in range(600_000))[:600_000]
    junk = b"@" + junk[1:]
    one, bad = tmp_path / "a.pt.trace.json", tmp_path / "junk.pt.trace.json"
    one.write_bytes(raw)
    bad.write_bytes(raw + junk)
    ref = load([one]).timelines[0]
    alone = decoded[0]
    decoded[0] = 0
    got = load([bad]).timelines[0]
    _same(got, ref)
    assert got.warnings[0] == (f"{bad}: trailing data after the end of the JSON document, from byte {len(raw):,}; "
                               "ignored the last 600,000 bytes")
    assert decoded[0] <= alone + 4 * decode.CHUNK_BYTES, (decoded[0], alone)


def test_garbage_after_a_gzip_stream_is_one_warning(rt, tmp_path):
    """GIVEN a real .json.gz followed by 1,000 bytes that are not gzip data
    WHEN loaded (the streaming reader) and read the careful way (read_bytes)
    THEN both keep every event and give one warning naming the garbage's offset in the file and its size
    (before: accepted without a word)."""
    comp = (rt / A).read_bytes()
    one, bad = tmp_path / "a.pt.trace.json.gz", tmp_path / "junk.pt.trace.json.gz"
    one.write_bytes(comp)
    bad.write_bytes(comp + b"not gzip " * 111 + b"!")
    expected = (f"{bad}: trailing data after the end of the gzip stream, from byte {len(comp):,} of the file "
                "(1,000 bytes), is not gzip data; ignored")
    ref = load([one]).timelines[0]
    got = load([bad]).timelines[0]
    _same(got, ref)
    assert got.warnings[0] == expected
    careful = read_bytes(bad)
    assert careful.warnings == [expected] and bytes(careful.data) == gzip.decompress(comp)

"""readers/file_bytes.py on small files: reading, gzip, size caps and JSON repair, checked against gzip/zlib/json.

GIVEN small files written here (plain, gzip, several gzip members, padded,
truncated, corrupt) and small JSON documents with one kind of damage each,
WHEN read / decoded, THEN the bytes equal what Python's own gzip / json give
for the intact part, caps hold at exactly the limit, and each warning or error
is the one line documented in file_bytes.py.
"""

from __future__ import annotations

import gzip
import io
import os
import json
import random
import struct
import types
import zlib
from pathlib import Path

import msgspec
import pytest

from expo_prof.errors import BadInput
from expo_prof.readers import file_bytes
from expo_prof.readers.file_bytes import Sink, decode_json, gzip_size_hint, inflate, read_bytes

DOC = json.dumps({"traceEvents": [{"name": f"e{i}", "ts": i, "dur": 1} for i in range(300)]}).encode()


def _gz(tmp_path, name, data, **kw):
    p = tmp_path / name
    p.write_bytes(gzip.compress(data, **kw))
    return p


def test_plain_file_is_read_whole_with_progress(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(DOC)
    seen = []
    got = read_bytes(p, progress=seen.append)
    assert bytes(got.data) == DOC and got.warnings == [] and got.compressed is False
    assert seen == [len(DOC)]
    # AND a cap of exactly the size is enough; one byte less is refused in one line naming both sizes
    assert bytes(read_bytes(p, max_bytes=len(DOC)).data) == DOC
    with pytest.raises(BadInput) as ei:
        read_bytes(p, max_bytes=len(DOC) - 1)
    # sizes in kB here (issue 34: "0.0 MB is over the 0.0 MB size cap" said nothing)
    assert str(ei.value) == f"{p}: {len(DOC) / 1e3:.1f} kB is over the {(len(DOC) - 1) / 1e3:.1f} kB size cap (raise it with --max-bytes)"


def test_missing_file_is_bad_input(tmp_path):
    p = tmp_path / "nope.json"
    with pytest.raises(BadInput) as ei:
        read_bytes(p)
    assert str(ei.value) == f"{p}: cannot read (No such file or directory)"
    assert file_bytes.file_size(p) == 0
    p.write_bytes(b"abc")
    assert file_bytes.file_size(p) == 3


def test_gzip_is_detected_by_magic_and_capped_at_exactly_the_limit(tmp_path):
    p = _gz(tmp_path, "no-gz-suffix.json", DOC)
    plain = tmp_path / "plain.json.gz"  # a gzip-looking name on a plain file
    plain.write_bytes(DOC)
    assert file_bytes.is_gzip(p) and not file_bytes.is_gzip(plain)
    assert read_bytes(plain).compressed is False
    seen = []
    got = read_bytes(p, progress=seen.append)
    assert bytes(got.data) == DOC and got.compressed is True and got.warnings == []
    assert sum(seen) == p.stat().st_size
    assert bytes(read_bytes(p, max_bytes=len(DOC)).data) == DOC
    with pytest.raises(BadInput, match=r"decompresses to more than .* \(size cap: a gzip bomb or a trace too large; "
                                       r"raise it with --max-bytes\)$"):
        read_bytes(p, max_bytes=len(DOC) - 1)


def test_concatenated_members_and_zero_padding(tmp_path):
    p = tmp_path / "multi.json.gz"
    p.write_bytes(gzip.compress(DOC[:1000]) + gzip.compress(DOC[1000:]) + b"\0" * 64)
    got = read_bytes(p)
    assert bytes(got.data) == DOC == gzip.decompress(gzip.compress(DOC[:1000]) + gzip.compress(DOC[1000:]))
    assert got.warnings == []


def test_truncated_gzip_keeps_what_inflated_and_says_so(tmp_path):
    full = gzip.compress(DOC * 50, compresslevel=1)
    p = tmp_path / "cut.json.gz"
    p.write_bytes(full[: len(full) // 2])
    got = read_bytes(p)
    # the oracle: what zlib inflates from the same prefix
    d = __import__("zlib").decompressobj(wbits=31)
    want = d.decompress(full[: len(full) // 2]) + d.flush()
    assert bytes(got.data) == want and 0 < len(want) < len(DOC) * 50
    assert got.warnings == [f"{p}: gzip stream is truncated; read the first {len(want) / 1e3:.1f} kB decompressed"]
    # AND a file cut inside the header holds nothing at all
    p.write_bytes(full[:10])
    with pytest.raises(BadInput, match=r"gzip stream is truncated before any data$"):
        read_bytes(p)


def test_corrupt_gzip_keeps_what_came_before(tmp_path):
    # GIVEN 3 MB that do not compress (so several 1 MiB pieces inflate before the damage at 2.5 MB)
    raw = random.Random(1).randbytes(3_000_000)
    full = bytearray(gzip.compress(raw, compresslevel=1))
    mid = 2_500_000
    full[mid : mid + 40] = b"\xff" * 40
    p = tmp_path / "bad.json.gz"
    p.write_bytes(bytes(full))
    got = read_bytes(p)
    assert len(got.warnings) == 1 and got.warnings[0].startswith(f"{p}: gzip data is corrupt (")
    assert got.warnings[0].endswith(f"; kept the {len(got.data) / 1e6:.1f} MB decompressed before it")
    assert raw.startswith(bytes(got.data)) and len(got.data) >= 1 << 20


@pytest.mark.parametrize("piece", [1, 7, 4096])
def test_inflate_yields_pieces_no_larger_than_asked(tmp_path, piece):
    p = _gz(tmp_path, "p.gz", DOC[:3000])
    with open(p, "rb") as f:
        pieces = list(inflate(p, f, 10**9, None, [], piece=piece))
    assert b"".join(pieces) == DOC[:3000] and max(map(len, pieces)) <= piece
    assert all(pieces)


def test_size_hint_is_the_trailer_when_plausible():
    data = gzip.compress(DOC)
    f = io.BytesIO(data)
    f.seek(5)
    assert gzip_size_hint(f, len(data), 10**9) == len(DOC) and f.tell() == 5  # position kept
    assert gzip_size_hint(f, len(data), len(DOC)) == len(DOC)  # the cap itself is plausible
    assert gzip_size_hint(f, len(data), len(DOC) - 1) == 0  # over the cap: not trusted
    assert gzip_size_hint(io.BytesIO(b"x" * 17), 17, 10**9) == 0  # no room for header + trailer
    # a trailer claiming more than 100x the file size (or 0) is not trusted either
    lie = data[:-4] + struct.pack("<I", len(data) * 100 + 1)
    assert gzip_size_hint(io.BytesIO(lie), len(lie), 10**12) == 0
    ok = data[:-4] + struct.pack("<I", len(data) * 100)
    assert gzip_size_hint(io.BytesIO(ok), len(ok), 10**12) == len(data) * 100
    zero = data[:-4] + struct.pack("<I", 0)
    assert gzip_size_hint(io.BytesIO(zero), len(zero), 10**12) == 0


def test_sink_grows_past_its_capacity():
    s = Sink(4)
    for chunk in (b"abc", b"defgh", b"", b"ij"):
        s.put(chunk)
    assert bytes(s.buf[: s.used]) == b"abcdefghij" and s.used == 10


def test_mb_formatting():
    # decimal units (10**3, 10**6, 10**9 bytes), one rounding: 1.35 MB and 1.235 GB round up; below a MB in kB,
    # below a kB in bytes, so that a small size never reads "0.0 MB" (issue 34)
    assert [file_bytes._mb(n) for n in (0, 999, 10_240, 1_234_567, 1_350_000, 999_999_999, 10**9, 1_235_000_000,
                                        2_345_678_901)] == [
        "0 bytes", "999 bytes", "10.2 kB", "1.2 MB", "1.4 MB", "1000.0 MB", "1.00 GB", "1.24 GB", "2.35 GB"]


DEC = msgspec.json.Decoder()


def test_decode_repairs_each_kind_of_damage_with_one_warning():
    # invalid UTF-8 inside a string: replaced, counted
    v = decode_json(b'{"traceEvents": [{"name": "a\xff\xfeb"}]}', DEC, "f")
    assert v.value == {"traceEvents": [{"name": "a\ufffd\ufffdb"}]}
    assert v.warnings == ["f: 2 invalid UTF-8 byte sequence(s) in strings replaced by U+FFFD"]
    # a raw control character: replaced by a space, counted
    v = decode_json(b'{"traceEvents": [{"name": "a\x01b\x02"}]}', DEC, "f")
    assert v.value == {"traceEvents": [{"name": "a b "}]}
    assert v.warnings == ["f: 2 raw control character(s) inside strings replaced by spaces"]
    # only raw tabs / newlines: their own message
    v = decode_json(b'{"traceEvents": [{"name": "a\tb\nc"}]}', DEC, "f")
    assert v.value == {"traceEvents": [{"name": "a b c"}]}
    assert v.warnings == ["f: raw tabs/newlines inside strings replaced by spaces"]


def test_truncated_and_malformed_documents_keep_the_complete_events():
    good = b'{"traceEvents": [{"a": 1}, {"b": {"c": 2}}, {"d": 3}'
    v = decode_json(good + b', {"e": ', DEC, "f")
    assert v.value == {"traceEvents": [{"a": 1}, {"b": {"c": 2}}, {"d": 3}]}
    (w,) = v.warnings
    assert w.startswith("f: JSON is truncated (") and w.endswith(f"kept the events before byte {len(good):,}, "
                                                                 f"skipped the last {len(good) + 8 - len(good):,} bytes")
    # a document cut right after an element keeps that element
    v = decode_json(good, DEC, "f")
    assert v.value["traceEvents"][-1] == {"d": 3}
    # garbage in the middle: "malformed", everything before it kept
    v = decode_json(b'{"traceEvents": [{"a": 1}, {"b": 2}, @@@ {"c": 3}]}', DEC, "f")
    assert v.value == {"traceEvents": [{"a": 1}, {"b": 2}]}
    # (msgspec's own "JSON is malformed: " prefix is not repeated inside the parentheses)
    assert v.warnings[0].startswith("f: JSON is malformed (invalid character (byte ")
    # a bare array: closed with "]"; nothing complete left: an empty list
    arr = msgspec.json.Decoder(list)
    assert decode_json(b'[{"a": 1}, {"b": 2}, {"c"', arr, "f").value == [{"a": 1}, {"b": 2}]
    v = decode_json(b'  [{"a', arr, "f")
    assert v.value == [] and "kept the events before byte 0," in v.warnings[0]
    # nothing recoverable: one-line BadInput with msgspec's reason
    with pytest.raises(BadInput, match=r"^f: not valid JSON \("):
        decode_json(b"@@@", DEC, "f")
    with pytest.raises(BadInput, match=r"^f: not valid JSON \("):
        decode_json(b'{"traceEvents": {"a', DEC, "f", container="object")


def test_schema_errors_are_not_repaired():
    # GIVEN a typed decoder and a well-formed document of the wrong shape THEN the ValidationError passes through
    with pytest.raises(msgspec.ValidationError):
        decode_json(b'{"traceEvents": 5}', msgspec.json.Decoder(dict[str, list]), "f")


def test_repair_names_what_it_fixed_and_counts_only_new_replacements():
    # GIVEN text that already holds one U+FFFD beside one invalid byte, and msgspec's message in either spelling
    raw = '{"n": "\ufffd'.encode() + b'\xff"}'
    for msg in ("Invalid UTF-8 encoded string", "JSON is malformed: invalid utf-8 sequence"):
        # WHEN repaired THEN the invalid byte becomes U+FFFD and only that one is counted (not the one already there)
        fixed, what, count = file_bytes.repair(raw, msg)
        assert (what, count) == ("utf8", 1) and json.loads(fixed) == {"n": "\ufffd\ufffd"}
    # AND raw control characters are "ctrl", each counted; tabs/newlines are fixed but not counted as control
    assert file_bytes.repair(b'["a\x01b\tc"]', "JSON is malformed: invalid character (byte 3)") == (b'["a b c"]', "ctrl", 1)
    # AND other damage is not repaired here
    assert file_bytes.repair(b'["a"', "Input data was truncated") is None


def test_salvage_reports_the_exact_byte_kept_and_steps_over_nested_objects():
    # GIVEN a document cut right after an element (no whitespace after it)
    good = b'{"traceEvents": [{"a": 1}, {"d": 3}'
    (w,) = decode_json(good, DEC, "f").warnings
    # THEN every byte is kept and the warning says so exactly
    assert w.endswith(f"kept the events before byte {len(good):,}, skipped the last 0 bytes")
    # GIVEN a cut inside an element after a nested object that is followed by another key: its "}," is no element end
    head = b'{"traceEvents": [{"a": 1}'
    v = decode_json(head + b', {"b": {"c": 2}, "x": 1, "y', DEC, "f")
    # THEN the nested candidate fails and the element before it is kept
    assert v.value == {"traceEvents": [{"a": 1}]} and f"before byte {len(head):,}," in v.warnings[0]


def test_salvage_tries_at_most_64_cut_points():
    # GIVEN an element cut after n nested objects, each followed by another key (n candidate cuts that fail)
    def cut_after(n: int) -> bytes:
        nested = b"".join(b'"k%d": {"v": %d}, ' % (i, i) for i in range(n))
        return b'{"traceEvents": [{"a": 1}, {' + nested + b'"z'
    # WHEN 63 fail THEN the 64th candidate, the end of {"a": 1}, is reached and kept
    assert decode_json(cut_after(63), DEC, "f").value == {"traceEvents": [{"a": 1}]}
    # WHEN 64 fail THEN the search stops there (bounded work on long damaged tails) with one clear error
    with pytest.raises(BadInput, match=r"^f: not valid JSON \("):
        decode_json(cut_after(64), DEC, "f")


def test_an_array_container_that_does_not_start_with_a_bracket_is_not_an_empty_list():
    # GIVEN a caller that expects a bare array, and text with nothing complete that is not an array at all
    # THEN it is not valid JSON, not "an empty event list"
    with pytest.raises(BadInput, match=r"^f: not valid JSON \("):
        decode_json(b'{"a', msgspec.json.Decoder(), "f", container="array")


def test_sink_grows_to_exactly_what_it_holds():
    # GIVEN a sink of 4 bytes WHEN 4 bytes, then 6 more are put (a trace can be gigabytes: no slack)
    s = Sink(4)
    s.put(b"abcd")
    assert len(s.buf) == 4
    s.put(b"efghij")
    # THEN it holds them all, and its buffer is exactly that long
    assert bytes(s.buf) == b"abcdefghij" and len(s.buf) == s.used == 10


class _Pieces:
    """A file whose reads return the given pieces one by one (short reads are legal), counting the reads."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces, self.reads = list(pieces), 0

    def read(self, n: int = -1) -> bytes:
        self.reads += 1
        return self.pieces.pop(0)[:n] if self.pieces else b""


def test_compressed_bytes_are_read_and_reported_a_chunk_at_a_time(tmp_path):
    # GIVEN a gzip file of 2.5 chunks of incompressible bytes
    raw = random.Random(3).randbytes(5 * file_bytes._CHUNK // 2)
    p = _gz(tmp_path, "r.gz", raw)
    seen: list[int] = []
    # WHEN inflated with progress THEN progress comes per read of at most one chunk, adding up to the file size
    with open(p, "rb") as f:
        assert b"".join(inflate(p, f, 10**9, seen.append, [])) == raw
    assert len(seen) >= 3 and max(seen) <= file_bytes._CHUNK and sum(seen) == p.stat().st_size


def test_a_truncated_stream_of_exactly_the_cap_is_kept_with_a_warning(tmp_path):
    # GIVEN a gzip stream without its 8-byte trailer whose data is exactly max_bytes long
    raw = random.Random(4).randbytes(5000)
    p = tmp_path / "t.gz"
    p.write_bytes(gzip.compress(raw)[:-8])
    warnings: list[str] = []
    # WHEN inflated with max_bytes = 5000 THEN every byte is kept (the cap is not exceeded) and it says truncated
    with open(p, "rb") as f:
        assert b"".join(inflate(p, f, len(raw), None, warnings)) == raw
    assert len(warnings) == 1 and "gzip stream is truncated" in warnings[0]


def test_padding_after_the_stream_ends_the_reading():
    # GIVEN a gzip member followed by zero padding spread over three more reads
    member = gzip.compress(b"x" * 100)
    f = _Pieces(member, b"\0" * 16, b"\0" * 16, b"\0" * 16)
    # WHEN inflated THEN the data is kept and reading stops at the first padding (the rest is never read)
    assert b"".join(inflate(Path("p.gz"), f, 10**9, None, [])) == b"x" * 100
    assert f.reads == 2 and len(f.pieces) == 2


class _Recording:
    """Wraps an inflater's decompressobj, recording the output limit of each decompress call."""

    def __init__(self, real, limits):
        self.real, self.limits = real, limits

    def decompress(self, data, max_length=0):
        self.limits.append(max_length)
        return self.real.decompress(data, max_length)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_zlib_is_never_asked_for_more_than_one_byte_past_the_cap(monkeypatch):
    # GIVEN a 100-byte stream, a cap of 10 bytes and pieces of 4, with the inflater's calls recorded
    real = file_bytes._inflate
    limits: list[int] = []
    monkeypatch.setattr(file_bytes, "_inflate", types.SimpleNamespace(
        decompressobj=lambda **kw: _Recording(real.decompressobj(**kw), limits)))
    got: list[bytes] = []
    # WHEN inflated THEN it stops with the size-cap error after 8 bytes, having asked for 4, 4 and then 3 bytes:
    # at most cap + 1 bytes are ever inflated (a gzip bomb costs no more memory than the cap)
    with pytest.raises(BadInput, match="decompresses to more than"):
        for piece in inflate(Path("b.gz"), io.BytesIO(gzip.compress(b"y" * 100)), 10, None, [], piece=4):
            got.append(piece)
    assert [len(x) for x in got] == [4, 4] and limits == [4, 4, 3]
    # AND under the cap the last piece is what the cap leaves, not smaller: 10 bytes in 4, 4, 2
    limits.clear()
    pieces = list(inflate(Path("c.gz"), io.BytesIO(gzip.compress(b"z" * 10)), 10, None, [], piece=4))
    assert [len(x) for x in pieces] == [4, 4, 2] and limits[:3] == [4, 4, 3]


class _EagerInflater:
    """FAKE inflater (a conforming zlib need not keep input back): it consumes all input at once and holds the
    output, handing it out ``max_length`` bytes at a time, with nothing left in ``unconsumed_tail``."""

    def __init__(self, **kw):
        self.real, self.held, self.unconsumed_tail = zlib.decompressobj(**kw), b"", b""

    def decompress(self, data, max_length=0):
        self.held += self.real.decompress(data)
        out, self.held = self.held[:max_length], self.held[max_length:]
        return out

    @property
    def eof(self):
        return self.real.eof and not self.held

    @property
    def unused_data(self):
        return self.real.unused_data

    def flush(self):
        out, self.held = self.held, b""
        return out


def test_output_held_inside_the_inflater_is_asked_for_again(monkeypatch):
    # GIVEN an inflater that eats the whole input and holds its output back (FAKE, see _EagerInflater)
    monkeypatch.setattr(file_bytes, "_inflate", types.SimpleNamespace(decompressobj=_EagerInflater))
    raw = b"w" * 1000
    warnings: list[str] = []
    # WHEN inflated in pieces of 64 THEN every byte comes in full pieces and the stream is complete, not "truncated"
    pieces = list(inflate(Path("e.gz"), io.BytesIO(gzip.compress(raw)), 10**9, None, warnings, piece=64))
    assert b"".join(pieces) == raw and warnings == [] and max(map(len, pieces)) == 64


def test_size_hint_boundaries_and_the_full_32_bit_trailer():
    # GIVEN trailers at the edges of what the hint accepts
    def hint(trailer: int, size: int | None = None, extra: bytes = b"", cap: int = 10**12) -> int:
        body = b"\x1f\x8b" + b"x" * 12 + struct.pack("<I", trailer)
        return gzip_size_hint(io.BytesIO(body + extra), size or len(body), cap)

    # THEN an 18-byte file (header + trailer, the least that has a trailer) is read: 18 is enough room
    assert hint(500) == 500
    # AND a trailer of 1 byte is a size like any other; above 2**31 the trailer is still unsigned
    assert hint(1) == 1
    big = io.BytesIO(b"\x1f\x8b" + b"y" * 40_000_000 + struct.pack("<I", 3 << 30))
    assert gzip_size_hint(big, 40_000_006, 10**12) == 3 << 30
    # AND the trailer is read at the size given (a file still growing past it is not read on)
    assert hint(500, extra=b"more bytes") == 500


def test_a_file_that_shrank_after_its_size_was_taken_gives_the_bytes_read(tmp_path):
    # GIVEN a file whose stat, taken first, says 100 bytes more than it holds when read
    p = tmp_path / "t.json"
    p.write_bytes(DOC[:500])

    class Stale(type(p)):
        def stat(self, **kw):
            st = os.stat(self)
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid,
                                   st.st_size + 100, st.st_atime, st.st_mtime, st.st_ctime))

    # WHEN read THEN the data is exactly the bytes the file holds (no zero padding past them)
    assert bytes(read_bytes(Stale(p)).data) == DOC[:500]

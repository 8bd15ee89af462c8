"""Truncated and damaged JSON keeps *exactly* the complete events before the damage.

The oracle is independent of the salvage code: a file cut at byte ``c`` must
read exactly like the well-formed file that holds only the events whose text
ends at or before ``c``. Loose checks ("fewer events than the whole file")
cannot see an off-by-one candidate that drops the last complete event.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from expo_prof.readers import load

NCCL = "hta/tests/data/nccl_parser_config/nccl_data.json.gz"
N_EVENTS = 400


@pytest.fixture(scope="module")
def doc(rt):
    """A real Kineto document re-serialised with known byte offsets: (text, end offset of each event)."""
    events = json.loads(gzip.decompress((rt / NCCL).read_bytes()))["traceEvents"][:N_EVENTS]
    head = '{"schemaVersion": 1, "traceEvents": [\n'
    parts, ends, pos = [], [], len(head)
    for e in events:
        t = json.dumps(e)
        parts.append(t)
        pos += len(t)
        ends.append(pos)  # offset just past the event's closing brace
        pos += 2  # ",\n"
    text = head + ",\n".join(parts) + "\n]}"
    return text.encode(), np.array(ends), parts, head


def _columns(path: Path):
    res = load([path])
    tl = res.timelines[0]
    return res, (tl.start.tolist(), tl.dur.tolist(), [tl.names[i] for i in tl.name], tl.kind.tolist())


def _expected(tmp_path: Path, parts, head: str, k: int):
    p = tmp_path / f"expected-{k}.pt.trace.json"
    p.write_text(head + ",\n".join(parts[:k]) + "\n]}")
    return _columns(p)[1]


@pytest.mark.slow
def test_cut_at_every_byte_of_the_last_events_keeps_exactly_the_complete_ones(doc, tmp_path):
    """GIVEN a real trace cut at every byte offset across its last three events (and a few earlier ones)
    WHEN loaded THEN the result equals the well-formed file of exactly the events complete before the cut,
    with a warning that names the byte kept up to."""
    data, ends, parts, head = doc
    cuts = list(range(int(ends[-4]) - 2, int(ends[-1]) + 1)) + [int(ends[100]), int(ends[100]) + 1, int(ends[250]) - 1]
    cache: dict[int, tuple] = {}
    for c in cuts:
        k = int((ends <= c).sum())
        if k not in cache:
            cache[k] = _expected(tmp_path, parts, head, k)
        p = tmp_path / "cut.pt.trace.json"
        p.write_bytes(data[:c])
        res, got = _columns(p)
        assert got == cache[k], f"cut at byte {c}: expected the first {k} events"
        # (a cut inside a number reads as "malformed", elsewhere as "truncated")
        assert any(("JSON is truncated" in w or "JSON is malformed" in w) and "kept the events before byte" in w
                   for w in res.warnings), c


def test_damage_between_events_skips_only_the_damage(doc, tmp_path):
    """GIVEN garbage written right after the comma that follows event i
    WHEN loaded THEN every event is kept (reading resumes at event i+1, issue 34), and the warning counts one
    malformed stretch and names the byte where it is."""
    data, ends, parts, head = doc
    everything = _expected(tmp_path, parts, head, N_EVENTS)
    for i in (10, 199, N_EVENTS - 2):
        at = int(ends[i]) + 1
        p = tmp_path / "damaged.pt.trace.json"
        p.write_bytes(data[:at] + b" @@garbage@@ " + data[at:])
        res, got = _columns(p)
        assert got == everything, i
        bad = data[:at] + b" @@garbage@@ " + data[at:]
        assert any(f"1 malformed event(s) skipped (first: invalid character at byte {bad.index(b'@@'):,}," in w
                   for w in res.warnings), (at, res.warnings)


@pytest.mark.parametrize("gz", [False, True])
def test_a_file_cut_and_damaged_before_the_cut_keeps_the_events_after_the_damage(doc, tmp_path, gz):
    """GIVEN event i's "ts" replaced by NaN, and the file cut inside a later event j (plain and gzip)
    WHEN loaded THEN the result equals the well-formed file of the events before j without event i: reading
    resumes after the damage and stops at the cut (it used to stop at the damage, losing every event after it),
    with one warning for the malformed event and one for the cut."""
    data, ends, parts, head = doc
    for i, j in ((5, 300), (150, 151), (200, N_EVENTS - 1)):
        start = int(ends[i]) - len(parts[i])
        a = data.index(b'"ts": ', start) + len(b'"ts": ')
        b = data.index(b",", a)
        damaged = data[:a] + b"NaN" + data[b:]
        cut = int(ends[j]) - len(parts[j]) + 40 + (len(b"NaN") - (b - a))  # 40 bytes into event j
        body = damaged[:cut]
        p = tmp_path / ("cut-damaged.pt.trace.json" + (".gz" if gz else ""))
        p.write_bytes(gzip.compress(body) if gz else body)
        res, got = _columns(p)
        q = tmp_path / f"without-{i}-before-{j}.pt.trace.json"
        q.write_text(head + ",\n".join(parts[:i] + parts[i + 1 : j]) + "\n]}")
        assert got == _columns(q)[1], (i, j)
        assert any("1 malformed event(s) skipped (first: " in w for w in res.warnings), res.warnings
        assert any("JSON is truncated" in w and "kept the events before byte" in w for w in res.warnings)


def test_damage_inside_an_event_skips_that_event_only(doc, tmp_path):
    """GIVEN event i's "ts" value replaced by NaN / Infinity / +1 / a single-quoted string (invalid JSON)
    WHEN loaded THEN the result equals the well-formed file without event i (events after it are read), with a
    warning counting one malformed event. (Before issue 34 everything after event i was lost.)"""
    data, ends, parts, head = doc
    for i, bad in ((0, b"NaN"), (57, b"Infinity"), (250, b"+1"), (N_EVENTS - 1, b"'x'")):
        start = int(ends[i]) - len(parts[i])
        j = data.index(b'"ts": ', start) + len(b'"ts": ')
        k = data.index(b",", j)
        p = tmp_path / "bad-value.pt.trace.json"
        p.write_bytes(data[:j] + bad + data[k:])
        res, got = _columns(p)
        q = tmp_path / f"without-{i}.pt.trace.json"
        q.write_text(head + ",\n".join(parts[:i] + parts[i + 1 :]) + "\n]}")
        assert got == _columns(q)[1], (i, bad)
        assert any("1 malformed event(s) skipped (first: " in w for w in res.warnings), res.warnings


def test_truncated_gzip_keeps_exactly_what_was_inflated(doc, tmp_path):
    """GIVEN the document gzipped and its compressed bytes cut at several points
    WHEN loaded THEN the events equal those complete in the bytes that zlib itself inflates from the cut file
    (an oracle outside expo-prof's readers, not the careful path compared with the fast one)."""
    data, ends, parts, head = doc
    comp = gzip.compress(data, compresslevel=6)
    for frac in (0.3, 0.55, 0.8, 0.97):
        cut = comp[: int(len(comp) * frac)]
        inflated = zlib.decompressobj(wbits=31).decompress(cut)
        k = int((ends <= len(inflated)).sum())
        p = tmp_path / "cut.pt.trace.json.gz"
        p.write_bytes(cut)
        res, got = _columns(p)
        assert got == _expected(tmp_path, parts, head, k), frac
        assert any("gzip stream is truncated" in w for w in res.warnings)

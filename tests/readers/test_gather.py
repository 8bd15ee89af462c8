"""The Chrome reader's columns gathered in C (expo_prof/readers/chrome/_gather.c, issue 41) against its Python path.

The C functions take only the plain case and hand everything else back (None), so what they return must be, bit
for bit, what the Python path makes of the same batch: the same codes in the same tables, the same exact
nanoseconds. Every expectation here comes from the Python path (``batch._gather`` set to None) or from
``timeparse.us_floats_to_ns``, never from the C code itself.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expo_prof.errors import BadInput
from expo_prof.readers import load
from expo_prof.readers.chrome import batch
from expo_prof.readers.chrome.columns import Cols, cat_times
from expo_prof.readers.chrome.decode import _DEC_EVENTS, _DEC_EVENTS_KNOWN, _DEC_EVENTS_RAWTS
from expo_prof.readers.timeparse import FLOAT_EXACT_LIMIT_US, us_floats_to_ns

try:
    from expo_prof.readers.chrome import _gather
except ImportError:  # pragma: no cover - checked by the first test
    _gather = None  # type: ignore[assignment]

_TIME_COLS = ("ts", "dur", "flow_ts")
_COLS = ("bad", "lane_col", "name_col", "cat_col", "task_col", "corr", "flow_id_col", "flow_ph", "flow_cat",
         "flow_bad", "flow_lane_col")
_TABLES = ("evkey", "cat", "name", "lane", "task", "flow_id", "flow_lane")


def test_the_c_extension_is_built():
    """GIVEN the project installed as the README says (`make install`: pip builds the optional C extension)
    WHEN the reader imports THEN its C column gathering is there (without it every trace reads ~1.5x slower)."""
    assert _gather is not None, ("expo_prof/readers/chrome/_gather.c is not built: `pip install -e .` builds it "
                                 "(it needs a C compiler and Python's headers)")
    assert batch._gather is _gather


def _state(c: Cols) -> dict[str, Any]:
    """Everything a batch leaves in ``c``, comparable with ==: the code tables in order, each column whole (times
    as exact ns, whatever chunk dtype carried them), the counts and metadata."""
    out: dict[str, Any] = {t: list(getattr(c, t).ids.items()) for t in _TABLES}
    for col in _TIME_COLS:
        out[col] = cat_times(getattr(c, col)).tolist()
    for col in _COLS:
        parts = getattr(c, col)
        out[col] = np.concatenate(parts).astype(np.int64).tolist() if parts else []
    for k in ("dropped", "meta_proc", "meta_thread", "meta_labels", "n_seen", "repairs"):
        out[k] = getattr(c, k)
    out["long_cuts"] = sorted(c.name.long.cuts)
    return out


def _collect(batches: list[bytes], monkeypatch, gathered: bool) -> dict[str, Any]:
    """:func:`batch.collect_events` of each batch (a JSON array of events) in turn into one Cols, with the C
    gathering or without it."""
    monkeypatch.setattr(batch, "_gather", _gather if gathered else None)
    c = Cols()
    for buf in batches:
        try:
            ev = _DEC_EVENTS_KNOWN.decode(buf)
        except Exception:
            ev = _DEC_EVENTS.decode(buf)
        batch.collect_events(ev, c, lambda buf=buf: _DEC_EVENTS_RAWTS.decode(buf))
    return _state(c)


_ID = st.one_of(st.integers(0, 3), st.integers(-(2**40), 2**40), st.just(1.0), st.just(True), st.just("7"),
                st.none(), st.just([1]))
_NAME = st.one_of(st.sampled_from(["aten::mm", "aten::add", "ProfilerStep#3", "expo::draw", ""]),
                  st.from_regex(r"k[ab]{9}z", fullmatch=True),  # (names of one length that differ inside)
                  st.text(max_size=6), st.text(alphabet="xy", min_size=250, max_size=300), st.none(),
                  st.integers(0, 9))
_TIME = st.one_of(
    st.integers(-(2**45), 2**45), st.integers(2**60, 2**64), st.integers(0, 10**6),
    st.floats(-2.0**44, 2.0**44, allow_nan=False), st.floats(0, 1e7, allow_nan=False), st.floats(0, 0.02),
    st.sampled_from([0.5, 1.0005, 2.5e-7, 8796093022207.999, 8796093022208.0, -0.0]),
    st.just(True), st.just("12.5"), st.none())
_CORR = st.one_of(st.integers(-1, 10**6), st.integers(2**62, 2**63 + 5), st.just(True), st.just("3"), st.just(2.0))


@st.composite
def _event(draw) -> dict[str, Any]:
    e: dict[str, Any] = {}
    ph = draw(st.sampled_from(["X", "X", "X", "X", "s", "f", "t", "M", "i", None]))
    if ph is not None:
        e["ph"] = ph
    e["cat"] = draw(st.one_of(st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "gpu_memcpy", "python_function",
                                                "user_annotation", "ac2g"]), st.sampled_from(["weird", "HCCL"]),
                              st.none(), st.just(3)))
    for k, s in (("name", _NAME), ("pid", _ID), ("tid", _ID), ("ts", _TIME), ("dur", _TIME), ("id", _ID)):
        if draw(st.integers(0, 9)):  # (mostly present)
            e[k] = draw(s)
    a = draw(st.integers(0, 5))
    if a == 1:
        e["args"] = None
    elif a >= 2:
        e["args"] = {"correlation": draw(_CORR)} if a < 5 else {"Task Type": draw(st.sampled_from(["AI_CORE", 4]))}
    return e


def _plain(e: dict[str, Any]) -> dict[str, Any]:
    """The event in its plainest form: what the C path takes whole (the same events repeated make most batches
    take it)."""
    return {"ph": "X", "cat": "cpu_op", "name": str(e.get("name"))[:20], "pid": 1, "tid": 2,
            "ts": e["ts"] if type(e.get("ts")) is float and abs(e["ts"]) < FLOAT_EXACT_LIMIT_US else 1.5,
            "dur": 2, "args": {"correlation": 5}}


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_event(), min_size=1, max_size=12), min_size=1, max_size=4), st.booleans())
def test_gathered_batches_equal_the_python_paths(monkeypatch, batches, plain):
    """GIVEN batches of events of every kind a file may hold (ids as int, float, bool, str, list; names short,
    long, missing, numbers; times int, float in and out of the exact range, huge ints, bools, text; args null,
    absent, with correlations of every type), or the same events made plain
    WHEN collected one after another into one Cols with the C gathering and without it
    THEN the code tables (order included), every column (times as exact ns), the counts and the metadata are
    equal."""
    if plain:
        batches = [[_plain(e) for e in b] + b[:1] for b in batches]
    bufs = [json.dumps(b).encode() for b in batches]
    try:
        for buf in bufs:
            _DEC_EVENTS.decode(buf)
    except Exception:  # (an integer past what msgspec decodes: not a batch the reader would see)
        return
    expected = _collect(bufs, monkeypatch, gathered=False)
    assert _collect(bufs, monkeypatch, gathered=True) == expected


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(-FLOAT_EXACT_LIMIT_US, FLOAT_EXACT_LIMIT_US, allow_nan=False, exclude_min=True,
                          exclude_max=True) | st.floats(-0.02, 0.02), min_size=1, max_size=50))
def test_float_times_round_exactly_as_numpy_does(values):
    """GIVEN float µs anywhere in the exact range (sub-ns values, halves, the limit's neighbours)
    WHEN gathered in C THEN the ns are timeparse.us_floats_to_ns's, the exact round-half-away of x × 1000."""
    ev = _DEC_EVENTS.decode(json.dumps([{"ph": "s", "id": 1, "ts": v} for v in values]).encode())
    got = _gather.flows(ev, None, FLOAT_EXACT_LIMIT_US)
    assert got is not None
    assert np.frombuffer(got[1], np.int64).tolist() == us_floats_to_ns(np.array(values, dtype=np.float64)).tolist()


_PLAIN = {"ph": "X", "name": "a", "ts": 1.5, "dur": 2, "args": {"correlation": 3}}


@pytest.mark.parametrize("odd,corr", [
    ({"name": 7}, True),  # a name that is no string
    ({"name": "x" * 300}, True),  # a long name not kept before
    ({"dur": 2**62}, True),  # x 1000 overflows
    ({"ts": math.ldexp(1, 43)}, True),  # at the exact range's limit
    ({"dur": True}, True),  # a bool
    ({"ts": "1.5"}, True),  # text
    ({"args": None}, True),  # args: null where the correlation is looked at
    ({"args": {"correlation": "3"}}, True),  # a correlation that is no int
])
def test_a_batch_with_an_odd_value_is_handed_back_with_its_table_as_it_was(odd, corr):
    """GIVEN a batch whose last kept event holds one odd value, after events with new names
    WHEN its columns are gathered THEN None (the Python path takes the batch), and the name table holds no name
    the call added; the same batch without the odd value is gathered."""
    events = [{**_PLAIN, "name": f"n{i}"} for i in range(5)] + [{**_PLAIN, **odd}]
    ev = _DEC_EVENTS.decode(json.dumps(events).encode())
    ids: dict[Any, int] = {"n0": 0}
    assert _gather.complete(ev, None, ids, 256, FLOAT_EXACT_LIMIT_US, corr) is None
    assert ids == {"n0": 0}
    got = _gather.complete(ev[:-1], None, ids, 256, FLOAT_EXACT_LIMIT_US, corr)
    assert got is not None and list(ids) == [f"n{i}" for i in range(5)]
    assert np.frombuffer(got[0], np.int32).tolist() == [0, 1, 2, 3, 4]


def test_a_long_name_kept_whole_before_is_gathered_and_an_unhashable_key_raises():
    """GIVEN a long name already in the table (kept whole before), and a key holding a list
    WHEN gathered THEN the long name gets its code, and the key raises TypeError (as the Python path's dict does)
    with the keys the call added taken out again."""
    long = "x" * 300
    ev = _DEC_EVENTS.decode(json.dumps([{**_PLAIN, "name": long}, {"ph": "X", "pid": 1},
                                        {"ph": "X", "pid": [1]}]).encode())
    got = _gather.complete(ev[:1], None, {long: 4}, 256, FLOAT_EXACT_LIMIT_US, None)
    assert got is not None and np.frombuffer(got[0], np.int32).tolist() == [4]
    ids: dict[Any, int] = {("X", None): 0}
    with pytest.raises(TypeError):
        _gather.key_codes(ev, ("ph", "pid"), ids)
    assert ids == {("X", None): 0}
    codes = np.frombuffer(_gather.key_codes(ev[:2], ("ph", "pid"), ids), np.int32)
    assert codes.tolist() == [0, 1] and list(ids) == [("X", None), ("X", 1)]


def _chrome_files(rt: Path) -> list[Path]:
    return sorted(p for p in rt.rglob("*") if p.name.endswith((".json", ".json.gz")) and p.is_file())


def test_every_real_trace_reads_the_same_with_and_without_the_c_gathering(rt, monkeypatch):
    """GIVEN every JSON file of ../shared/realtraces (Kineto CUDA, ROCm, CPU and vLLM CPU, Ascend trace views, and
    the files that are no trace) WHEN read with the C gathering and without it
    THEN the same Timelines, column by column, names, lanes, flows, counts and warnings; or the same refusal."""
    files = _chrome_files(rt)
    assert len(files) >= 20, f"{rt}: expected the real JSON traces"
    differ = []
    for p in files:
        got = []
        for gathered in (False, True):
            monkeypatch.setattr(batch, "_gather", _gather if gathered else None)
            try:
                got.append(load([p]))
            except BadInput as e:
                got.append(str(e))
        if _summary(got[0]) != _summary(got[1]):
            differ.append(str(p.relative_to(rt)))
    assert not differ, differ


def _summary(loaded: Any) -> Any:
    if isinstance(loaded, str):
        return loaded
    out = []
    for tl in loaded.timelines:
        cols = {k: getattr(tl, k).tolist() for k in ("start", "dur", "lane", "name", "kind", "step")}
        meta = {k: (v.tolist() if isinstance(v, np.ndarray) else
                    {kk: vv.tolist() if isinstance(vv, np.ndarray) else vv for kk, vv in v.items()}
                    if isinstance(v, dict) else v) for k, v in tl.meta.items()}
        out.append((cols, tl.names, tl.lanes, tl.warnings, meta))
    return out

"""GENERATED hostile Chrome/Kineto traces (issue 27), for tests/readers/test_hostile_memory.py and bench_ingest.py.

Nothing here is a real profiler output: the files are built to cost a reader
as much as possible for what they hold.

* :func:`write_empty_objects`: a Kineto trace whose ``traceEvents`` holds ``n``
  empty objects ``{}`` around the five events of :data:`EVENTS` (the issue's
  300 MB file is ``n = 100_000_000``); :func:`write_filler` the same with any
  elements (numbers, ``null``, objects without ``ph``…);
* :func:`write_blank_gzip`: gzip data inflating to ``blank`` bytes of spaces
  between an optional ``prefix`` and ``suffix`` (a whitespace gzip bomb:
  about 1000:1), written as concatenated gzip members of 256 MB each (legal
  gzip, compressed once, so a 4 GB bomb is written in about a second).

:data:`EVENTS` are one step (``ProfilerStep#1``, 90–390 µs) with the
exponential draw (200–230 µs, thread 1) under a compute op of another thread
(``aten::add``, 190–250 µs, thread 2): ``expo-prof analyze`` finds one draw of
30 µs, all of it hidden.
"""

from __future__ import annotations

import functools
import gzip
import zlib
from pathlib import Path

#: The five events (one draw, 30 µs, hidden by aten::add on another thread).
EVENTS = [
    b'{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":90,"dur":300}',
    b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":100,"dur":50}',
    b'{"ph":"X","cat":"cpu_op","name":"aten::exponential_","pid":1,"tid":1,"ts":200,"dur":30}',
    b'{"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":2,"ts":190,"dur":60}',
    b'{"ph":"X","cat":"cpu_op","name":"aten::argmax","pid":1,"tid":1,"ts":260,"dur":10}',
]
#: The draw's duration and the part hidden, in ns (from the construction above).
DRAW_NS, HIDDEN_NS = 30_000, 30_000
HEAD = b'{"traceEvents": ['
TAIL = b'], "baseTimeNanoseconds": 0}'
_MEMBER = 1 << 28


def trace(events: list[bytes] = EVENTS) -> bytes:
    """A whole small trace of ``events``."""
    return HEAD + b",".join(events) + TAIL


def write_empty_objects(path: Path, n: int, *, sep: bytes = b",", gz: bool = False) -> int:
    """Write ``n`` ``{}`` elements (separated by ``sep``) around :data:`EVENTS`: one event first, one after
    the first third of the ``{}``, the other three at the end. Returns the decompressed size in bytes."""
    return write_filler(path, b"{}" + sep, n, sep=sep, gz=gz)


def write_filler(path: Path, unit: bytes, n: int, *, sep: bytes = b",", gz: bool = False) -> int:
    """Write ``unit`` (one or more elements, each followed by a separator) ``n`` times around :data:`EVENTS`, as
    :func:`write_empty_objects` places them. Returns the decompressed size in bytes."""
    first = n // 3
    parts = [(HEAD + EVENTS[0] + sep, None), (unit, first), (EVENTS[1] + sep, None), (unit, n - first),
             (sep.join(EVENTS[2:]) + TAIL, None)]
    size = 0
    opener = (lambda p: gzip.open(p, "wb", compresslevel=1)) if gz else (lambda p: open(p, "wb"))
    with opener(path) as f:
        for data, times in parts:
            if times is None:
                f.write(data)
                size += len(data)
                continue
            block = unit * 65536
            left = times
            while left:
                k = min(left, 65536)
                f.write(block if k == 65536 else unit * k)
                size += k * len(unit)
                left -= k
    return size


def write_blank_gzip(path: Path, blank: int, *, prefix: bytes = b"", suffix: bytes = b"") -> int:
    """Write gzip data inflating to ``prefix``, at least ``blank`` spaces (a multiple of 1 MiB), ``suffix``.
    Returns the decompressed size in bytes."""
    mib = -(-blank // (1 << 20))
    whole, rest = divmod(mib, _MEMBER >> 20)
    with open(path, "wb") as f:
        if prefix:
            f.write(gzip.compress(prefix, 1))
        for _ in range(whole):
            f.write(_blank_member(_MEMBER >> 20))
        if rest:
            f.write(_blank_member(rest))
        if suffix:
            f.write(gzip.compress(suffix, 1))
    return len(prefix) + (mib << 20) + len(suffix)


@functools.lru_cache(maxsize=4)
def _blank_member(mib: int) -> bytes:
    """One gzip member of ``mib`` MiB of spaces (compressed once per process: about 1 s per 256 MiB)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    return b"".join([*(c.compress(block) for _ in range(mib)), c.flush()])

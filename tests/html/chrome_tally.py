"""An independent reading of a Chrome-trace file for the Perfetto export tests: plain gzip + json, exact ns by Decimal.

Nothing of expo_prof is used here: the times and counts the tests expect come from this reading, not from
the code under test. Times: the µs number's decimal text × 1000 (``parse_float=Decimal``; Ascend writes
``ts`` as strings), plus ``baseTimeNanoseconds``.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any


def load(path: Path) -> tuple[list[dict], int, dict]:
    """The file's events, its base time in ns (0 when it has none) and its top level ({} for a bare array)."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=Decimal)
    if isinstance(doc, list):
        return doc, 0, {}
    return doc["traceEvents"], int(doc.get("baseTimeNanoseconds") or 0), doc


def ns(v: Any) -> int:
    """A µs value (number or decimal string) as integer ns, rounded half away from zero.

    A JSON number's digits past the ns (Ascend durations such as ``877.4575``) are those of the float64 it
    denotes, as for any JSON reader: 877.4575 is 877.45749999… there, 877457 ns.
    """
    d = v if isinstance(v, Decimal) else Decimal(str(v).strip().strip('"'))
    if isinstance(v, Decimal) and int(v.as_tuple().exponent) < -3:
        d = Decimal(float(v))
    return int((d * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def complete(events: list[dict], base: int) -> Counter:
    """Every complete event as (start ns, end ns, name)."""
    return Counter((ns(e["ts"]) + base, ns(e["ts"]) + base + max(ns(e["dur"]), 0), e.get("name", ""))
                   for e in events if e.get("ph") == "X")


def tally(events: list[dict]) -> tuple[Counter, Counter]:
    """What a Perfetto export should hold of these events and leave out, by label: complete events by category
    (``no category``), ``instant [cat]``, ``flow CAT`` (the two events of each flow whose id has a start and an
    end are in, the others out), ``metadata``, ``counter``, ``ph=…``."""
    written: Counter = Counter()
    left: Counter = Counter()
    flows: dict[tuple, Counter] = {}
    for e in events:
        ph, cat = e.get("ph"), e.get("cat")
        if ph == "X":
            written[cat or "no category"] += 1
        elif ph in ("i", "I"):
            written["instant" + (f" {cat}" if cat else "")] += 1
        elif ph in ("s", "f", "t"):
            flows.setdefault((cat, e.get("id")), Counter())[ph] += 1
        else:
            left[{"M": "metadata", "C": "counter"}.get(ph, f"ph={ph}")] += 1
    for (cat, _), phases in flows.items():
        both = 2 if phases["s"] and phases["f"] else 0
        written[f"flow {cat}"] += both
        left[f"flow {cat}"] += sum(phases.values()) - both
    return +written, +left


_SUMMARY = re.compile(r"(\d+) source events in the file \(([^()]*)\), (?:none left out|(\d+) left out \(([^();]*);)")


def summary(msg: str) -> tuple[Counter, Counter]:
    """The per-category counts of an ``export --format perfetto`` summary line: (in the file, left out); the
    totals it states are checked against the lists."""
    m = _SUMMARY.search(" ".join(msg.split()))
    assert m, msg

    def counts(text: str | None) -> Counter:
        c: Counter = Counter()
        for item in (text or "").split(", "):
            if item and item != "none":
                label, n = item.rsplit(" ", 1)
                c[label] += int(n)
        return c

    written, left = counts(m.group(2)), counts(m.group(4))
    assert sum(written.values()) == int(m.group(1)) and sum(left.values()) == int(m.group(3) or 0)
    return written, left

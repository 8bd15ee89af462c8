"""Independent (stdlib-only) views of the real files for the reader tests.

The readers use msgspec, vectorised parsing and their own classification; these
helpers re-read the same files with ``json`` / ``decimal`` so tests compare the
readers against an independent computation.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path


def plain_json(path: Path):
    """The file parsed by the stdlib, floats kept as exact Decimals."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw, parse_float=Decimal)


def us_to_ns(v) -> int:
    """Exact µs (int, Decimal or decimal string) → ns, rounding half up like the readers."""
    d = Decimal(str(v).strip()) * 1000
    return int(d.to_integral_value(rounding="ROUND_HALF_UP"))

"""``compare --json``: the ComparisonResult as one JSON object (schema in docs/ab.md)."""

from __future__ import annotations

from typing import IO

import msgspec

from expo_prof.abtest.model import ComparisonResult


def encode(result: ComparisonResult) -> bytes:
    """Indented UTF-8 JSON; non-finite floats become null (msgspec's rule)."""
    return msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n"


def write(result: ComparisonResult, file: IO[str]) -> None:
    """Write the JSON text to a text stream."""
    file.write(encode(result).decode())

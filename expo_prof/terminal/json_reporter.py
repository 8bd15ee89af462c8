"""``analyze --json``: the result model encoded as documented in docs/json-output.md."""

from __future__ import annotations

import sys
from typing import IO

import msgspec

from expo_prof.analysis.model import AnalysisResult

_encoder = msgspec.json.Encoder()


def encode(result: AnalysisResult, *, indent: int = 2) -> bytes:
    """The JSON document (UTF-8 bytes, newline-terminated)."""
    raw = _encoder.encode(result)
    if indent:
        raw = msgspec.json.format(raw, indent=indent)
    return raw + b"\n"


def decode(data: bytes | str) -> AnalysisResult:
    """Parse and validate a document written by :func:`encode` (same schema version)."""
    return msgspec.json.decode(data, type=AnalysisResult)


class JsonReporter:
    """Writes the versioned JSON document."""

    def __init__(self, indent: int = 2) -> None:
        self.indent = indent

    def render(self, result: AnalysisResult, file: IO[str] | None = None) -> None:
        out = file if file is not None else sys.stdout
        out.write(encode(result, indent=self.indent).decode("utf-8"))
        out.flush()

"""``analyze --json``: the result model encoded as documented in docs/json-output.md.

Memory: a document can be large (119 MB for eight ranks of 20 000 steps), so it is written as bytes, straight
to the destination: the compact encoding, then one indented copy of it (the compact one freed as soon as
the indented one exists), never a decoded ``str`` copy, nor a copy to append the final newline.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from typing import IO, Any

import msgspec

from expo_prof.analysis.model import AnalysisResult

_encoder = msgspec.json.Encoder()


def chunks(result: AnalysisResult, *, indent: int = 2) -> Iterator[bytes]:
    """The JSON document (UTF-8) in two pieces: the document, then its final newline."""
    raw = _encoder.encode(result)
    if indent:
        raw = msgspec.json.format(raw, indent=indent)  # rebinding frees the compact encoding
    yield raw
    del raw
    yield b"\n"


def encode(result: AnalysisResult, *, indent: int = 2) -> bytes:
    """The JSON document (UTF-8 bytes, newline-terminated)."""
    return b"".join(chunks(result, indent=indent))


def decode(data: bytes | str) -> AnalysisResult:
    """Parse and validate a document written by :func:`encode` (same schema version)."""
    return msgspec.json.decode(data, type=AnalysisResult)


def write_bytes(out: Any, parts: Iterator[bytes]) -> None:
    """Write ``parts`` to ``out``: a binary file as they are; a text stream with a binary buffer
    (``sys.stdout``, also under click's CliRunner and pytest's capture) into that buffer, after what the text
    layer holds, so the bytes are the document's UTF-8 whatever the stream's encoding; any other text stream
    (``io.StringIO``) decoded, piece by piece."""
    if isinstance(out, io.TextIOBase) or hasattr(out, "encoding"):
        buffer = getattr(out, "buffer", None)
        if buffer is None:
            for part in parts:
                out.write(part.decode("utf-8"))
            out.flush()
            return
        out.flush()
        out = buffer
    for part in parts:
        out.write(part)
    out.flush()


class JsonReporter:
    """Writes the versioned JSON document."""

    def __init__(self, indent: int = 2) -> None:
        self.indent = indent

    def chunks(self, result: AnalysisResult) -> Iterator[bytes]:
        """The document as bytes (:func:`chunks`), for a file written piece by piece
        (:func:`expo_prof.output.write_chunks`)."""
        return chunks(result, indent=self.indent)

    def render(self, result: AnalysisResult, file: IO[str] | IO[bytes] | None = None) -> None:
        """Write the document to ``file`` (default: stdout) as bytes (:func:`write_bytes`)."""
        write_bytes(file if file is not None else sys.stdout, self.chunks(result))

"""``analyze --json`` writes its document as bytes, straight to where it goes (expo_prof/terminal/json_reporter.py).

GIVEN the committed tiny off/on sample's document, WHEN it is written to each kind of destination the CLI meets
(stdout as a text stream with a binary buffer, as in a terminal, a pipe, a file, click's CliRunner and pytest's
capture; a binary file; a text stream without a buffer; ``-o FILE``), THEN every one holds exactly
:func:`json_reporter.encode`'s bytes, after anything printed before it.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from expo_prof.cli.main import cli as root
from expo_prof.pipeline import run
from expo_prof.terminal import JsonReporter, json_reporter

SAMPLE = Path(__file__).resolve().parents[2] / "traces" / "samples" / "tiny-cpu-off-on"


@pytest.fixture(scope="module")
def document():
    return run([SAMPLE]).document


def test_every_destination_gets_the_same_bytes(document):
    """GIVEN the sample's document WHEN rendered to a text stream over a buffer (text already written to it), a
    binary file, a StringIO, and joined by encode THEN the bytes are the same (UTF-8, one final newline), and
    the text written before comes first."""
    want = json_reporter.encode(document)
    assert want.endswith(b"}\n") and want.count(b"\n  \"schema\": ") == 1

    raw = io.BytesIO()
    text = io.TextIOWrapper(raw, encoding="utf-8")
    text.write("before\n")  # held by the text layer until flushed: must come first
    JsonReporter().render(document, text)
    assert raw.getvalue() == b"before\n" + want

    binary = io.BytesIO()
    JsonReporter().render(document, binary)
    assert binary.getvalue() == want

    plain = io.StringIO()
    JsonReporter().render(document, plain)
    assert plain.getvalue().encode("utf-8") == want

    assert b"".join(JsonReporter().chunks(document)) == want


def test_stdout_of_clirunner_and_o_file_hold_the_document(document, tmp_path):
    """GIVEN the sample WHEN ``analyze --json`` runs under click's CliRunner, to stdout and with ``-o FILE``
    THEN both hold encode's bytes of the same document."""
    want = json_reporter.encode(document)
    r = CliRunner().invoke(root, ["analyze", str(SAMPLE), "--json"], catch_exceptions=False)
    assert r.exit_code == 0
    assert r.stdout_bytes == want
    out = tmp_path / "a.json"
    r = CliRunner().invoke(root, ["-q", "analyze", str(SAMPLE), "--json", "-o", str(out)], catch_exceptions=False)
    assert r.exit_code == 0
    assert out.read_bytes() == want
